"""A file's outline: the symbols indexed from it, nested by containment, in line order.

What an agent reads before opening a file (which classes, which methods, where): the code
nodes of the published version of one file, under the same access rule as read (an
unreadable repository answers like an unknown one). Module nodes and the line-range chunks
of files no grammar handles are not symbols, so they are left out; a symbol whose parent is
left out is a top-level one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from cograph_api.access_rules import Viewer, repository_readable
from cograph_api.limits import OUTLINE_MAX_SYMBOLS
from retrieval.search.reading import check_path, require_repository
from svckit.errors import NotFound

_FILE_SQL = f"""
SELECT r.id, r.commit_sha, r.published_generation, f.language
FROM repositories r
JOIN files f ON f.repository_id = r.id AND f.path = $4
WHERE r.slug = $3 AND {repository_readable("r", "$1", "$2")}
"""

_SYMBOLS_SQL = """
SELECT name, qualified_name, kind, signature, start_line, end_line, parent_qualified_name
FROM code_nodes
WHERE repository_id = $1 AND path = $2 AND generation <= $3
  AND kind NOT IN ('module', 'chunk')
ORDER BY start_line, end_line DESC, id
LIMIT $4
"""


@dataclass
class Symbol:
    name: str
    qualified_name: str
    kind: str
    signature: str
    start_line: int
    end_line: int
    children: list[Symbol] = field(default_factory=list)


@dataclass(frozen=True)
class Outline:
    repo: str
    path: str
    commit: str
    language: str
    symbols: list[Symbol]
    truncated: bool


async def outline(conn: asyncpg.Connection, viewer: Viewer, *, repo: str, path: str) -> Outline:
    path = check_path(path)
    await require_repository(conn, repo, viewer)
    found = await conn.fetchrow(_FILE_SQL, viewer.principal_id, viewer.admin, repo, path)
    if found is None:
        raise NotFound(f"no indexed file {path} in {repo}")
    rows = await conn.fetch(
        _SYMBOLS_SQL, found["id"], path, found["published_generation"], OUTLINE_MAX_SYMBOLS + 1
    )
    truncated = len(rows) > OUTLINE_MAX_SYMBOLS
    return Outline(
        repo,
        path,
        found["commit_sha"],
        found["language"],
        nest(rows[:OUTLINE_MAX_SYMBOLS]),
        truncated,
    )


def nest(rows: list[asyncpg.Record] | list[dict[str, object]]) -> list[Symbol]:
    """Symbols under their parents (by qualified name); rows come in line order, so a
    parent precedes what it contains and every list stays in line order."""
    by_name: dict[str, Symbol] = {}
    roots: list[Symbol] = []
    for row in rows:
        symbol = Symbol(
            str(row["name"]),
            str(row["qualified_name"]),
            str(row["kind"]),
            str(row["signature"] or ""),
            int(str(row["start_line"])),
            int(str(row["end_line"])),
        )
        parent = by_name.get(str(row["parent_qualified_name"] or ""))
        (parent.children if parent is not None else roots).append(symbol)
        # Overloads share a qualified name: children go to the first definition.
        by_name.setdefault(symbol.qualified_name, symbol)
    return roots

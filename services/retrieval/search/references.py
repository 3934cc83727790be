"""Find references: a symbol's definitions (every overload, the implementation first) and
every stored use that points at one of them, paged by an opaque cursor.

A reference is one use: its `line`, the code node holding it (the enclosing function,
class or module: its name and `start_line`..`end_line`) and the edge's kind (calls,
imports, inherits, implements). An edge holds every use of one name in one node, so it
answers one reference per line it stored; an edge an earlier release wrote stored no
lines and answers once, at the enclosing node's first line. `contains` edges are
structure, not references, and are left out. Only resolved edges count: a call through a
receiver whose type nothing states is not taken for a use of every method of that name
(grep finds those). Every statement applies the search access rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from cograph_api import limits
from cograph_api.access_rules import Viewer, repository_readable
from cograph_api.cursors import LINE, PATH_FIELD, ROW_ID, CursorCodec
from retrieval.indexing.parsing.overloads import is_overload_stub
from retrieval.search.graph import GraphNode, node_id
from retrieval.search.reading import check_limit, require_repository

DEFINITIONS_MAX = 20


@dataclass(frozen=True, slots=True)
class Definition:
    node: GraphNode
    level: int  # 0 exact qualified name, 1 dotted suffix, 2 bare name
    stub: bool


def order_definitions(found: Sequence[Definition]) -> list[Definition]:
    """The best match level only (exact qualified name, else a dotted suffix, else the bare
    name), with every overload of it, implementations before stubs, then shorter names."""
    if not found:
        return []
    best = min(d.level for d in found)
    kept = [d for d in found if d.level == best]
    return sorted(
        kept,
        key=lambda d: (
            d.stub,
            len(d.node.qualified_name),
            d.node.path,
            d.node.start_line,
        ),
    )[:DEFINITIONS_MAX]


# `#N` marks the 2nd, 3rd... definition of one name in a file (overloads): it is not part
# of the name the caller asks for.
_DEFINITIONS_SQL = f"""
WITH named AS (
    SELECT n.id, n.path, n.qualified_name, n.kind, n.start_line, n.end_line, n.signature,
           n.language, left(n.body, 2000) AS body, r.slug AS repo,
           regexp_replace(n.qualified_name, '#[0-9]+$', '') AS plain
    FROM code_nodes n JOIN repositories r ON r.id = n.repository_id
    WHERE r.slug = $3 AND {repository_readable("r", "$1", "$2")}
      AND n.generation <= r.published_generation
      AND n.kind <> 'chunk'
      AND (n.name = $5 OR n.qualified_name = $4 OR n.qualified_name LIKE $6
           OR n.qualified_name LIKE $7)
)
SELECT *, CASE WHEN plain = $4 THEN 0
               WHEN right(plain, length($4) + 1) = '.' || $4 THEN 1 ELSE 2 END AS level
FROM named
WHERE plain = $4 OR right(plain, length($4) + 1) = '.' || $4 OR
      regexp_replace(plain, '^.*\\.', '') = $4
ORDER BY level, id
LIMIT 200
"""


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def find_definitions(
    conn: asyncpg.Connection, repo: str, symbol: str, viewer: Viewer
) -> list[Definition]:
    bare = symbol.rsplit(".", 1)[-1]
    escaped = _like_escape(symbol)
    rows = await conn.fetch(
        _DEFINITIONS_SQL,
        viewer.principal_id,
        viewer.admin,
        repo,
        symbol,
        bare,
        f"{escaped}#%",
        f"%.{escaped}%",
    )
    found = [
        Definition(
            GraphNode(
                id=node_id(int(row["id"])),
                repo=row["repo"],
                path=row["path"],
                qualified_name=row["qualified_name"],
                kind=row["kind"],
                start_line=int(row["start_line"]),
                end_line=int(row["end_line"]),
                signature=(row["signature"] or (row["body"] or "").split("\n", 1)[0])[:400],
            ),
            int(row["level"]),
            is_overload_stub(row["language"], row["body"] or ""),
        )
        for row in rows
    ]
    return order_definitions(found)


@dataclass(frozen=True, slots=True)
class ReferenceRow:
    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    target: str
    line: int  # the use's; the enclosing node's first line when the edge stored none


@dataclass(frozen=True)
class ReferencesPage:
    definitions: list[GraphNode]
    references: list[ReferenceRow]
    next_cursor: str


_REFERENCES_SQL = f"""
SELECT e.id, e.kind, e.dst_node_id, s.path, s.start_line, s.end_line, s.qualified_name,
       u.line
FROM code_edges e
JOIN code_nodes s ON s.id = e.src_node_id
JOIN repositories r ON r.id = s.repository_id
CROSS JOIN LATERAL unnest(coalesce(e.lines, ARRAY[s.start_line])) AS u(line)
WHERE e.dst_node_id = ANY($3::bigint[]) AND e.kind <> 'contains'
  AND r.slug = $4 AND {repository_readable("r", "$1", "$2")}
  AND s.generation <= r.published_generation
  AND ($5::text IS NULL OR (s.path, u.line, e.id) > ($5::text, $6::int, $7::bigint))
ORDER BY s.path, u.line, e.id
LIMIT $8
"""


# The last reference a page returned: (path, line, edge id), the statement's order; an
# edge's lines are distinct, so the three name one use.
_POSITION = (PATH_FIELD, LINE, ROW_ID)


async def references(
    conn: asyncpg.Connection,
    viewer: Viewer,
    *,
    repo: str,
    symbol: str,
    cursor: str,
    cursors: CursorCodec,
    limit: int | None,
) -> ReferencesPage:
    """One page of references; NOT_FOUND when `repo` is unknown or not readable."""
    size = check_limit(
        limit,
        limits.REFERENCES_LIMIT_MIN,
        limits.REFERENCES_LIMIT_MAX,
        limits.REFERENCES_LIMIT_DEFAULT,
        "limit",
    )
    scope = f"refs\x00{repo}\x00{symbol}"
    position = cursors.decode(cursor, "refs", scope, _POSITION)
    after_path, after_line, after_id = position if position is not None else (None, 0, 0)
    await require_repository(conn, repo, viewer)
    definitions = await find_definitions(conn, repo, symbol, viewer)
    ids = [int(d.node.id.split(":", 1)[1]) for d in definitions]
    rows = []
    if ids:
        rows = await conn.fetch(
            _REFERENCES_SQL,
            viewer.principal_id,
            viewer.admin,
            ids,
            repo,
            after_path,
            after_line,
            after_id,
            size + 1,
        )
    page = [
        ReferenceRow(
            r["path"],
            int(r["start_line"]),
            int(r["end_line"]),
            r["qualified_name"],
            r["kind"],
            node_id(int(r["dst_node_id"])),
            int(r["line"]),
        )
        for r in rows[:size]
    ]
    next_cursor = ""
    if len(rows) > size:
        last = rows[size - 1]
        next_cursor = cursors.encode(
            "refs", scope, [last["path"], int(last["line"]), int(last["id"])]
        )
    return ReferencesPage([d.node for d in definitions], page, next_cursor)

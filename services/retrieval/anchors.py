"""Anchors of notes, as retrieval sees them: resolving a note's anchors to indexed code (as
the caller, under the search access rule) and comparing stored anchors with the published
index (as the commons' own identity).

An anchor points at one code node of a repository's default branch, published: a symbol
(its qualified name, or a bare or dotted name only one node has) or the smallest node
covering a line range of an indexed file. It is judged later by the node's qualified
name, file and two hashes (signature, whitespace runs collapsed; whole text):

- a node of the same qualified name (in the same file first, else elsewhere): another
  signature hash is `signature_changed`, the same signature and another body
  `body_changed`, the same body in the same file `fresh`, in another file `moved`;
- else a node of the same bare name with the same body hash, anywhere: `moved`;
- else `orphaned` (also when the repository is gone).

Nothing here runs during publication: the commons asks when it sees a newer generation.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from cograph_api import limits as L
from cograph_api.access_rules import Viewer, repository_readable
from cograph_api.anchors import Target
from svckit.errors import InvalidArgument, NotFound

_OVERLOAD = re.compile(r"#[0-9]+$")
# Candidates read per anchor when following a node by its bare name and body.
_MOVED_CANDIDATES = 2
# Nodes of one qualified name read per check (a name defined in many files at once).
_SAME_NAME_MAX = 50


def signature_hash(signature: str) -> str:
    """SHA-256 (hex) of a signature with whitespace runs collapsed: a reflowed parameter
    list is the same signature."""
    return hashlib.sha256(" ".join(signature.split()).encode()).hexdigest()


def body_hash(body: str) -> str:
    """SHA-256 (hex) of a node's text; the same as `_BODY_HASH_SQL` computes."""
    return hashlib.sha256(body.encode()).hexdigest()


_BODY_HASH_SQL = "encode(sha256(convert_to(n.body, 'UTF8')), 'hex')"


def bare_name(qualified_name: str) -> str:
    """The last segment of a qualified name, without an overload's `#N`."""
    return _OVERLOAD.sub("", qualified_name).rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Repository:
    id: int
    slug: str
    commit: str
    generation: int


@dataclass(frozen=True)
class Node:
    """A code node as an anchor records it."""

    repository_id: int
    repo: str
    qualified_name: str
    path: str
    start_line: int
    end_line: int
    kind: str
    signature_hash: str
    body_hash: str
    commit: str
    generation: int


@dataclass(frozen=True)
class Stored:
    """An anchor as the commons stores it."""

    id: str
    repository_id: int
    qualified_name: str
    path: str
    signature_hash: str
    body_hash: str


@dataclass(frozen=True)
class Check:
    id: str
    state: str  # fresh, body_changed, signature_changed, moved, orphaned
    current: Node | None
    commit: str
    generation: int


_NODE_COLUMNS = (
    "n.id, n.path, n.qualified_name, n.name, n.kind, n.start_line, n.end_line, n.signature, n.body"
)


def _node(repo: Repository, row: asyncpg.Record) -> Node:
    return Node(
        repository_id=repo.id,
        repo=repo.slug,
        qualified_name=row["qualified_name"],
        path=row["path"],
        start_line=int(row["start_line"]),
        end_line=int(row["end_line"]),
        kind=row["kind"],
        signature_hash=signature_hash(row["signature"] or ""),
        body_hash=body_hash(row["body"]),
        commit=repo.commit,
        generation=repo.generation,
    )


# ---------------------------------------------------------------- resolving, as the caller


async def readable_repository(conn: asyncpg.Connection, slug: str, viewer: Viewer) -> Repository:
    """The default branch of `slug`, or NOT_FOUND worded as every read words it: unknown
    and unreadable repositories are one answer."""
    row = await conn.fetchrow(
        "SELECT r.id, r.slug, r.commit_sha, r.published_generation FROM repositories r "
        f"WHERE r.slug = $3 AND r.parent_id IS NULL AND {repository_readable('r', '$1', '$2')}",
        viewer.principal_id,
        viewer.admin,
        slug,
    )
    if row is None or row["commit_sha"] is None:
        raise NotFound(f"no repository {slug}")
    return Repository(
        int(row["id"]), row["slug"], row["commit_sha"], int(row["published_generation"])
    )


_SYMBOL_SQL = f"""
SELECT {_NODE_COLUMNS},
       CASE WHEN n.qualified_name = $3 THEN 0 ELSE 1 END AS level
FROM code_nodes n
WHERE n.repository_id = $1 AND n.generation <= $2 AND n.kind <> 'chunk'
  AND lower(n.name) = lower($4) AND n.name = $4
  AND (n.qualified_name = $3 OR $3 NOT LIKE '%.%'
       OR right(n.qualified_name, length($3) + 1) = '.' || $3)
  AND ($5::text = '' OR n.path = $5)
ORDER BY level, n.path, n.start_line, n.id
LIMIT 50
"""

_LINES_SQL = f"""
SELECT {_NODE_COLUMNS}
FROM code_nodes n
WHERE n.repository_id = $1 AND n.generation <= $2 AND n.path = $3
  AND n.start_line <= $4 AND n.end_line >= $5
ORDER BY n.end_line - n.start_line, n.start_line DESC, n.id
LIMIT 1
"""


async def _resolve_symbol(
    conn: asyncpg.Connection, repo: Repository, target: Target, where: str
) -> Node:
    rows = await conn.fetch(
        _SYMBOL_SQL,
        repo.id,
        repo.generation,
        target.symbol,
        bare_name(target.symbol),
        target.path,
    )
    exact = [r for r in rows if r["level"] == 0]
    found = exact or rows
    if not found:
        in_file = f" in {target.path}" if target.path else ""
        raise InvalidArgument(
            f"{where}.symbol: no symbol {target.symbol!r}{in_file} in {repo.slug}"
        )
    if len(found) > 1:
        # The caller may read the repository, yet the answer names no candidate: a count
        # and how to narrow it are enough to act on.
        raise InvalidArgument(
            f"{where}.symbol: {len(found)} symbols match {target.symbol!r} in {repo.slug}; "
            "give its full qualified name, or a path"
        )
    return _node(repo, found[0])


async def _resolve_lines(
    conn: asyncpg.Connection, repo: Repository, target: Target, where: str
) -> Node:
    row = await conn.fetchrow(
        _LINES_SQL, repo.id, repo.generation, target.path, target.start_line, target.end_line
    )
    if row is not None:
        return _node(repo, row)
    indexed = await conn.fetchval(
        "SELECT 1 FROM code_nodes n WHERE n.repository_id = $1 AND n.generation <= $2 "
        "AND n.path = $3 LIMIT 1",
        repo.id,
        repo.generation,
        target.path,
    )
    if not indexed:
        raise InvalidArgument(f"{where}.path: no indexed code file {target.path} in {repo.slug}")
    raise InvalidArgument(
        f"{where}: lines {target.start_line}-{target.end_line} of {target.path} lie in no "
        "indexed symbol"
    )


async def resolve(
    conn: asyncpg.Connection, targets: Sequence[Target], viewer: Viewer
) -> list[Node]:
    """Each target's node, in order, from one snapshot of the index; NOT_FOUND for a
    repository the viewer cannot read, INVALID_ARGUMENT naming the anchor that does not
    resolve to exactly one node."""
    if len(targets) > L.ANCHORS_PER_POST_MAX:
        raise InvalidArgument(f"targets: at most {L.ANCHORS_PER_POST_MAX}")
    nodes: list[Node] = []
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        repositories: dict[str, Repository] = {}
        for index, target in enumerate(targets):
            where = f"anchors[{index}]"
            repo = repositories.get(target.repo)
            if repo is None:
                repo = repositories[target.repo] = await readable_repository(
                    conn, target.repo, viewer
                )
            if target.symbol:
                nodes.append(await _resolve_symbol(conn, repo, target, where))
            else:
                nodes.append(await _resolve_lines(conn, repo, target, where))
    return nodes


async def readable(
    conn: asyncpg.Connection, ids: Sequence[int], slugs: Sequence[str], viewer: Viewer
) -> list[tuple[int, str]]:
    """(id, slug) of the repositories named that the viewer may read (default branches)."""
    if len(ids) > L.ANCHOR_REPOSITORIES_MAX or len(slugs) > L.ANCHOR_REPOSITORIES_MAX:
        raise InvalidArgument(f"at most {L.ANCHOR_REPOSITORIES_MAX} repository ids and slugs")
    rows = await conn.fetch(
        "SELECT r.id, r.slug FROM repositories r "
        "WHERE (r.id = ANY($3::bigint[]) OR r.slug = ANY($4::text[])) AND r.parent_id IS NULL "
        f"AND {repository_readable('r', '$1', '$2')}",
        viewer.principal_id,
        viewer.admin,
        list(ids),
        [s.strip().lower() for s in slugs],
    )
    return [(int(r["id"]), r["slug"]) for r in rows]


# ---------------------------------------------------------------- staleness, as the commons


async def generations(conn: asyncpg.Connection, ids: Sequence[int]) -> dict[int, Repository]:
    """The published generation and commit of each repository asked about that exists."""
    rows = await conn.fetch(
        "SELECT id, slug, commit_sha, published_generation FROM repositories "
        "WHERE id = ANY($1::bigint[]) AND parent_id IS NULL",
        list(ids),
    )
    return {
        int(r["id"]): Repository(
            int(r["id"]), r["slug"], r["commit_sha"] or "", int(r["published_generation"])
        )
        for r in rows
    }


_SAME_NAME_SQL = f"""
SELECT {_NODE_COLUMNS}
FROM code_nodes n
WHERE n.repository_id = $1 AND n.generation <= $2 AND n.qualified_name = ANY($3::text[])
ORDER BY n.qualified_name, n.path, n.start_line, n.id
"""

_MOVED_SQL = f"""
SELECT {_NODE_COLUMNS}
FROM code_nodes n
WHERE n.repository_id = $1 AND n.generation <= $2
  AND lower(n.name) = lower($3) AND n.name = $3 AND {_BODY_HASH_SQL} = $4
ORDER BY n.path, n.start_line, n.id
LIMIT {_MOVED_CANDIDATES}
"""


def judge(anchor: Stored, same_name: Sequence[Node]) -> tuple[str, Node | None]:
    """The state of `anchor` against the published nodes of its qualified name (the
    module's first rule) and the node it points at now; ("orphaned", None) when there is
    none, and the caller then looks for the same body under the same bare name."""
    if not same_name:
        return "orphaned", None
    here = [n for n in same_name if n.path == anchor.path]
    node = (here or list(same_name))[0]
    if node.signature_hash != anchor.signature_hash:
        return "signature_changed", node
    if node.body_hash != anchor.body_hash:
        return "body_changed", node
    return ("fresh" if node.path == anchor.path else "moved"), node


async def _check_repository(
    conn: asyncpg.Connection, repo: Repository, anchors: Sequence[Stored]
) -> list[Check]:
    names = sorted({a.qualified_name for a in anchors})
    rows = await conn.fetch(_SAME_NAME_SQL, repo.id, repo.generation, names)
    by_name: dict[str, list[Node]] = {}
    for row in rows:
        nodes = by_name.setdefault(row["qualified_name"], [])
        if len(nodes) < _SAME_NAME_MAX:
            nodes.append(_node(repo, row))
    checks = []
    for anchor in anchors:
        state, node = judge(anchor, by_name.get(anchor.qualified_name, []))
        if node is None:
            moved = await conn.fetchrow(
                _MOVED_SQL,
                repo.id,
                repo.generation,
                bare_name(anchor.qualified_name),
                anchor.body_hash,
            )
            if moved is not None:
                state, node = "moved", _node(repo, moved)
        checks.append(Check(anchor.id, state, node, repo.commit, repo.generation))
    return checks


async def recheck(
    conn: asyncpg.Connection, anchors: Sequence[Stored]
) -> tuple[dict[int, Repository], list[Check]]:
    """Every anchor judged against its repository's published index, in the order given,
    all from one snapshot."""
    if len(anchors) > L.ANCHORS_RECHECK_MAX:
        raise InvalidArgument(f"anchors: at most {L.ANCHORS_RECHECK_MAX}")
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        repos = await generations(conn, sorted({a.repository_id for a in anchors}))
        found: dict[str, Check] = {}
        grouped: dict[int, list[Stored]] = {}
        for anchor in anchors:
            grouped.setdefault(anchor.repository_id, []).append(anchor)
        for repository_id, group in grouped.items():
            repo = repos.get(repository_id)
            if repo is None:
                for anchor in group:
                    found[anchor.id] = Check(anchor.id, "orphaned", None, "", 0)
                continue
            for check in await _check_repository(conn, repo, group):
                found[check.id] = check
    return repos, [found[a.id] for a in anchors]

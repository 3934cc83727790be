"""Graph expansion: callers, callees and the parent container around some code nodes.

Not a stream: it runs after retrieval, on a repository-scoped query only, and is capped
at GRAPH_NODE_CAP neighbour nodes. Each edge keeps the kind it was indexed with (calls,
imports, inherits, implements; contains for a parent) rather than labelling every edge
`calls`. Neighbours are fetched under the same access filter as search, so a
node the caller may not read never appears, and neither does an edge to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from cograph_api.access_rules import Viewer, repository_readable
from retrieval.search.search_settings import GRAPH_NODE_CAP


def node_id(row_id: int) -> str:
    """The public id of a code node, as in SearchResult.id."""
    return f"code:{row_id}"


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: str
    repo: str
    path: str
    qualified_name: str
    kind: str
    start_line: int
    end_line: int
    signature: str


@dataclass(frozen=True, slots=True)
class GraphEdge:
    src: str
    dst: str
    kind: str


@dataclass
class GraphResult:
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    truncated: bool = False  # neighbours were left out at the cap


@dataclass(frozen=True, slots=True)
class _Link:
    seed: int  # position of the seed it was found from
    priority: int  # parent, then callers, then callees
    src: int
    dst: int
    kind: str
    order: int  # edge id, for a stable order among equals


# One pass over the seeds: their parent (from parent_id), incoming edges (callers and
# implementers) and outgoing ones (callees, imports, bases). `contains` edges are left to
# parent_id: a class's children are not its callers.
_LINKS_SQL = """
WITH seeds AS (
    SELECT s.id, s.ord FROM unnest($1::bigint[]) WITH ORDINALITY AS s(id, ord)
)
SELECT s.ord, 0 AS priority, n.parent_id AS src, n.id AS dst, 'contains' AS kind, 0 AS ord2
FROM seeds s JOIN code_nodes n ON n.id = s.id
WHERE n.parent_id IS NOT NULL
UNION ALL
SELECT s.ord, 1, e.src_node_id, e.dst_node_id, e.kind, e.id
FROM seeds s JOIN code_edges e ON e.dst_node_id = s.id
WHERE e.kind <> 'contains'
UNION ALL
SELECT s.ord, 2, e.src_node_id, e.dst_node_id, e.kind, e.id
FROM seeds s JOIN code_edges e ON e.src_node_id = s.id
WHERE e.kind <> 'contains' AND e.dst_node_id IS NOT NULL
"""


def _balanced(links: Sequence[_Link]) -> list[_Link]:
    """Links by seed rank; within a seed its parent first, then callers and callees taken
    in turn (a caller, a callee, a caller...), each side in edge order, so a cap cuts both
    sides alike instead of filling with callers before any callee."""
    by_seed: dict[int, tuple[list[_Link], list[_Link], list[_Link]]] = {}
    for link in sorted(links, key=lambda x: (x.seed, x.priority, x.order, x.src, x.dst)):
        by_seed.setdefault(link.seed, ([], [], []))[link.priority].append(link)
    ordered: list[_Link] = []
    for seed in sorted(by_seed):
        parents, callers, callees = by_seed[seed]
        ordered.extend(parents)
        for i in range(max(len(callers), len(callees))):
            ordered.extend(side[i] for side in (callers, callees) if i < len(side))
    return ordered


def choose_neighbours(
    seeds: Sequence[int], links: Sequence[_Link], cap: int | None = GRAPH_NODE_CAP
) -> list[int]:
    """Neighbour ids in order of discovery (seed rank, then the parent, then callers and
    callees in turn), without the seeds themselves, at most `cap` (None: all)."""
    seed_set = set(seeds)
    chosen: list[int] = []
    seen: set[int] = set()
    for link in _balanced(links):
        for other in (link.src, link.dst):
            if other in seed_set or other in seen:
                continue
            if len(chosen) == cap:
                return chosen
            seen.add(other)
            chosen.append(other)
    return chosen


def _node(row: asyncpg.Record) -> GraphNode:
    signature = row["signature"] or (row["body"] or "").split("\n", 1)[0]
    return GraphNode(
        id=node_id(int(row["id"])),
        repo=row["repo"],
        path=row["path"],
        qualified_name=row["qualified_name"],
        kind=row["kind"],
        start_line=int(row["start_line"]),
        end_line=int(row["end_line"]),
        signature=signature[:400],
    )


async def fetch_nodes(
    conn: asyncpg.Connection, ids: Sequence[int], repo: str, viewer: Viewer
) -> dict[int, GraphNode]:
    """The given nodes that are in `repo` and readable by `viewer`."""
    if not ids:
        return {}
    rows = await conn.fetch(
        f"""
        SELECT n.id, n.path, n.qualified_name, n.kind, n.start_line, n.end_line,
               n.signature, left(n.body, 400) AS body, r.slug AS repo
        FROM code_nodes n JOIN repositories r ON r.id = n.repository_id
        WHERE n.id = ANY($3::bigint[]) AND r.slug = $4
          AND n.generation <= r.published_generation
          AND {repository_readable("r", "$1", "$2")}
        """,
        viewer.principal_id,
        viewer.admin,
        list(ids),
        repo,
    )
    return {int(row["id"]): _node(row) for row in rows}


async def expand(
    conn: asyncpg.Connection,
    seeds: Sequence[int],
    repo: str,
    viewer: Viewer,
    cap: int = GRAPH_NODE_CAP,
) -> GraphResult:
    """Neighbours of `seeds` (code node ids, best first) within `repo`."""
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        return GraphResult()
    rows = await conn.fetch(_LINKS_SQL, seeds)
    links = [
        _Link(
            int(r["ord"]),
            int(r["priority"]),
            int(r["src"]),
            int(r["dst"]),
            r["kind"],
            int(r["ord2"]),
        )
        for r in rows
        if r["src"] is not None and r["dst"] is not None
    ]
    # Fetch a few more than the cap: some candidates may be unreadable or elsewhere.
    everyone = choose_neighbours(seeds, links, None)
    candidates = everyone[: cap * 3]
    readable = await fetch_nodes(conn, candidates, repo, viewer)
    visible = [i for i in candidates if i in readable]
    neighbours = visible[:cap]
    # Cut when a readable neighbour was left out (or, past the candidates looked at,
    # may have been): never because of nodes the viewer cannot read.
    truncated = len(visible) > cap or (len(neighbours) == cap and len(everyone) > len(candidates))
    kept = set(seeds) | set(neighbours)
    edges: list[GraphEdge] = []
    seen: set[tuple[int, int, str]] = set()
    for link in sorted(links, key=lambda x: (x.seed, x.priority, x.order, x.src, x.dst)):
        key = (link.src, link.dst, link.kind)
        if link.src in kept and link.dst in kept and key not in seen:
            seen.add(key)
            edges.append(GraphEdge(node_id(link.src), node_id(link.dst), link.kind))
    return GraphResult([readable[i] for i in neighbours], edges, truncated)

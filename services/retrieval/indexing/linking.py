"""Edge targets for a whole repository, recomputed from what is stored.

Re-resolving every edge after a run is what repairs edges that point into changed files:
a rewritten file gets new node ids (the old targets were nulled on delete), and a new
definition can make a previously ambiguous or missing name resolvable.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.indexing.parsing import CodeNode, Edge, resolve_edges


def compute_links(
    nodes: Sequence[Mapping[str, Any]], edges: Sequence[Mapping[str, Any]]
) -> tuple[list[int], list[int | None]]:
    """(edge ids, new target ids) for the edges whose resolved target changed."""
    nodes_by_file: dict[str, list[CodeNode]] = defaultdict(list)
    node_ids: dict[tuple[str, str], int] = {}
    bindings: dict[str, dict[str, str]] = {}
    for row in nodes:
        if row.get("bindings"):  # module nodes; NULL where an earlier release wrote the row
            bindings[row["path"]] = json.loads(row["bindings"])
        nodes_by_file[row["path"]].append(
            CodeNode(
                row["qualified_name"],
                row["name"],
                row["kind"],
                row["language"],
                row["path"],
                row["start_line"],
                row["end_line"],
                row["signature"],
                row.get("head") or "",  # decorators: overload stubs (parsing.overloads)
                row["parent_qualified_name"],
            )
        )
        node_ids[(row["path"], row["qualified_name"])] = row["id"]
    edges_by_file: dict[str, list[Edge]] = defaultdict(list)
    meta_by_file: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    for row in edges:
        edges_by_file[row["path"]].append(
            Edge(row["src"], row["dst_name"], row["kind"], receiver=row.get("receiver"))
        )
        meta_by_file[row["path"]].append((row["id"], row["dst_node_id"]))
    resolved = resolve_edges(nodes_by_file, edges_by_file, bindings=bindings)
    meta = [item for path in edges_by_file for item in meta_by_file[path]]
    changed_ids: list[int] = []
    targets: list[int | None] = []
    for (edge_id, current), edge in zip(meta, resolved, strict=True):
        target = (
            node_ids.get((edge.dst_path, edge.dst))
            if edge.dst is not None and edge.dst_path is not None
            else None
        )
        if target != current:
            changed_ids.append(edge_id)
            targets.append(target)
    return changed_ids, targets

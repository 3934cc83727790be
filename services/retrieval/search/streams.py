"""The streams of a search: which (store, unit, stream) queries run, and running one.

Vector always (when the query could be embedded), lexical only when the query has
text, symbol on the code store only. Each runs on its own pooled connection, all reading
the search's one snapshot, so they can run concurrently; a failure is reported to the
caller (engine.py), which logs it and lets the stream contribute nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from retrieval.layers import UNIT_ORDER, Store, Unit
from retrieval.search import search_sql
from retrieval.search.fusion import STREAM_NAMES, StreamHit, StreamName
from retrieval.search.query_text import code_tsquery, doc_tsquery
from retrieval.search.search_sql import OwnerScope, Scope
from retrieval.search.snapshot import Connect


@dataclass(frozen=True, slots=True)
class StreamTask:
    """One SQL query: a stream over one unit of one store."""

    store: Store
    unit: Unit
    stream: StreamName

    @property
    def label(self) -> str:
        return f"{self.stream}/{self.store}/{self.unit}"


def plan_streams(
    units: Mapping[Store, Sequence[Unit]],
    enabled: frozenset[StreamName],
    has_text: bool,
) -> list[StreamTask]:
    """The queries to run, in a fixed order (stores, then streams, then units)."""
    tasks: list[StreamTask] = []
    for store, store_units in units.items():
        for stream in STREAM_NAMES:
            if stream not in enabled:
                continue
            if stream == "lexical" and not has_text:
                continue
            if stream == "symbol":
                if store != "code" or not store_units:
                    continue
                # Qualified names belong to nodes: feed the body unit (code/ast layers),
                # or the summary unit when only ast_summary was asked for.
                first = min(store_units, key=UNIT_ORDER.__getitem__)
                tasks.append(StreamTask(store, first, stream))
                continue
            tasks.extend(StreamTask(store, unit, stream) for unit in store_units)
    return tasks


async def run_stream(
    connect: Connect,
    task: StreamTask,
    *,
    scope: Scope,
    query: str,
    vector: npt.NDArray[np.float32] | None,
    cap: int,
    split_identifiers: bool = True,
    owners: Mapping[Store, OwnerScope] | None = None,
) -> list[StreamHit]:
    """Runs one stream query on a connection of its own (`connect`: the search's snapshot,
    search/snapshot.py); raises on failure. `owners`: what the search resolved of the
    readable owners per store (search_sql.readable_owners), so a vector stream does not
    resolve them again."""
    if task.stream == "vector":
        if vector is None:
            return []
        return await search_sql.run_vector(
            connect,
            task.store,
            task.unit,
            scope=scope,
            vector=vector,
            cap=cap,
            owners=owners.get(task.store) if owners is not None else None,
        )
    if task.stream == "lexical":
        tsquery = (
            code_tsquery(query, split_identifiers) if task.store == "code" else doc_tsquery(query)
        )
        if not tsquery:
            return []
        return await search_sql.run_lexical(
            connect, task.store, task.unit, scope=scope, tsquery=tsquery, cap=cap
        )
    return await search_sql.run_symbol(connect, task.unit, scope, query, cap)

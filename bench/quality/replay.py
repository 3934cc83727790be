"""Fusion replayed offline, for sweeping `rrf_k` and `candidate_cap` without re-querying.

Each query's stream lists are fetched once, in process, with the search module's own
`plan_streams` and `run_stream` at the largest cap swept; every (k, cap) pair is then fused
with the search module's own `merge_lists` and `pipeline.rank` (weighted RRF per query
class, containment, layer and test weights), as `SearchEngine.search` uses them.
Truncating each unit's list to a smaller cap before merging gives the same candidates a
search run at that cap would have (the top `cap` of a union by score lie within each
list's top `cap`); the one approximation is the vector stream, whose HNSW scan is sized
by the cap (ef_search) and may differ slightly at smaller caps. The replay at the
defaults is checked against the RPC's own ranking.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import asyncpg

from bench.quality.search_client import Row
from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient
from retrieval.layers import BROAD, Store, Unit, layers_of_unit, stores_for, units_for
from retrieval.search.fusion import STREAM_NAMES, StreamHit, StreamName, merge_lists
from retrieval.search.pipeline import rank
from retrieval.search.query_text import has_text
from retrieval.search.ranking import FusionSettings, default_fusion, plan_fusion
from retrieval.search.search_sql import Scope
from retrieval.search.snapshot import pooled
from retrieval.search.streams import StreamTask, plan_streams, run_stream

RowIndex = Mapping[tuple[Store, int], Row]


@dataclass(frozen=True)
class Candidates:
    """One query's stream lists (broad layers, every readable repository)."""

    tasks: tuple[StreamTask, ...]
    hits: Mapping[StreamTask, list[StreamHit]]
    text: str = ""  # the query (its class picks the stream weights)


async def collect(
    pool: asyncpg.Pool,
    embedder: EmbedderClient,
    text: str,
    cap: int,
    split_identifiers: bool = True,
) -> Candidates:
    layers = BROAD
    units = {store: units_for(store, layers) for store in stores_for(layers)}
    tasks = tuple(plan_streams(units, frozenset(STREAM_NAMES), has_text(text)))
    vector = (await embedder.embed([text]))[0]
    scope = Scope(Viewer(None, False))  # anonymous: public repositories, as the RPC sees
    lists = await asyncio.gather(
        *(
            run_stream(
                pooled(pool),
                task,
                scope=scope,
                query=text,
                vector=vector,
                cap=cap,
                split_identifiers=split_identifiers,
            )
            for task in tasks
        )
    )
    return Candidates(tasks, dict(zip(tasks, lists, strict=True)), text)


def fused_ids(
    candidates: Candidates,
    k: int,
    cap: int,
    weights: Mapping[Unit, float] | None = None,
    fusion: FusionSettings | None = None,
) -> list[tuple[Store, int]]:
    """The fused result rows (store, row id), best first, as the engine would order them
    (with `weights` as RETRIEVAL_LAYER_WEIGHTS and `fusion` as the stream weights,
    containment and test/document weights; the service's defaults when None)."""
    lists: dict[Store, dict[StreamName, list[StreamHit]]] = {}
    for store in stores_for(BROAD):
        per_stream = {
            name: merge_lists(
                [
                    candidates.hits[t][:cap]
                    for t in candidates.tasks
                    if t.store == store and t.stream == name
                ]
            )
            for name in STREAM_NAMES
            if any(t.store == store and t.stream == name for t in candidates.tasks)
        }
        if per_stream:
            lists[store] = per_stream
    plan = plan_fusion(candidates.text, k, cap, fusion or default_fusion(), weights)
    return [
        (item.store, item.id)
        for item in rank(lists, plan)
        for _ in layers_of_unit(item.store, item.unit, BROAD)
    ]


def rows_of(ids: Iterable[tuple[Store, int]], index: RowIndex, limit: int) -> list[Row]:
    """The first `limit` rows, identified; rows deleted since ranking are skipped."""
    out: list[Row] = []
    for key in ids:
        row = index.get(key)
        if row is not None:
            out.append(row)
            if len(out) == limit:
                break
    return out


async def load_index(pool: asyncpg.Pool) -> dict[tuple[Store, int], Row]:
    """Every indexed code node and doc chunk by (store, id), to name replayed rows."""
    async with pool.acquire() as conn:
        code = await conn.fetch(
            "SELECT n.id, r.slug, n.path, n.qualified_name, n.start_line, n.end_line "
            "FROM code_nodes n JOIN repositories r ON r.id = n.repository_id"
        )
        docs = await conn.fetch(
            "SELECT d.id, r.slug, d.path, d.start_line, d.end_line "
            "FROM repo_docs d JOIN repositories r ON r.id = d.repository_id"
        )
    index: dict[tuple[Store, int], Row] = {}
    for rec in code:
        index[("code", int(rec["id"]))] = Row(
            rec["slug"], rec["path"], rec["qualified_name"], rec["start_line"], rec["end_line"]
        )
    for rec in docs:
        index[("repo_docs", int(rec["id"]))] = Row(
            rec["slug"], rec["path"], "", rec["start_line"], rec["end_line"]
        )
    return index

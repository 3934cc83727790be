"""Runs every query through every configuration and keeps what the metrics need.

Configurations (all through the `Search` RPC, default layers, top_k 10, default snippets:
cograph_api.limits.SNIPPET_CHARS_DEFAULT characters unless RETRIEVAL_SNIPPET_CHARS is set):
- `vector`, `lexical`, `symbol`: one stream alone (the request's `streams` field);
- `fused`: all three streams, RRF, every readable repository;
- `fused@repo`: the same, scoped to the answer's repository (what graph expansion needs);
- `fused+graph`: `fused@repo` with include_graph; an answer counts when it is among the
  results or the graph nodes (graph nodes have no rank: they follow the results).
Beside them, outside the service, package_baselines.py ranks each query by the unseen
harness's baselines (dense, bm25, dense+bm25, dense+doc). Per query the tuning sweep
replays fusion offline (replay.py) for every (rrf_k, cap), and for a grid of layer weights
(RETRIEVAL_LAYER_WEIGHTS) at the default k and cap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.quality.datasets import Answer, Query, RepoCopy
from bench.quality.metrics import first_rank
from bench.quality.replay import RowIndex, collect, fused_ids, rows_of
from bench.quality.search_client import Row, search
from bench.quality.stack import Stack
from retrieval.layers import Unit
from retrieval.search.search_settings import DEFAULT_CANDIDATE_CAP, DEFAULT_RRF_K

SINGLE_STREAMS: tuple[str, ...] = ("vector", "lexical", "symbol")
FUSED = "fused"
SCOPED = "fused@repo"
GRAPH = "fused+graph"
CONFIGS: tuple[str, ...] = (*SINGLE_STREAMS, FUSED, SCOPED, GRAPH)
TOP_K = 10
DEFAULT_K, DEFAULT_CAP = DEFAULT_RRF_K, DEFAULT_CANDIDATE_CAP  # the service's defaults


WeightPoint = tuple[float, float]  # (ast_summary weight, repo_doc weight); code is 1


@dataclass(frozen=True)
class Sweep:
    """The (rrf_k, candidate_cap) grid replayed per query, and the layer-weight grid
    replayed at the default k and cap."""

    ks: tuple[int, ...] = (10, 30, 60, 100)
    caps: tuple[int, ...] = (50, 100, 300)
    summary_weights: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25)
    doc_weights: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5)

    def points(self) -> list[tuple[int, int]]:
        return [(k, cap) for k in self.ks for cap in self.caps]

    def weight_points(self) -> list[WeightPoint]:
        return [(s, d) for s in self.summary_weights for d in self.doc_weights]


@dataclass
class Outcome:
    """One query's results under every configuration."""

    query: Query
    ranks: dict[str, int | None] = field(default_factory=dict)
    graph_hit: bool = False  # answer among the scoped results or the graph nodes
    result_chars: list[int] = field(default_factory=list)  # fused snippets, default settings
    whole_file_chars: int = 0  # the distinct files of those results, whole
    sweep: dict[tuple[int, int], int | None] = field(default_factory=dict)
    weight_sweep: dict[WeightPoint, int | None] = field(default_factory=dict)
    replay_agrees: bool = True  # offline fusion at the defaults == the RPC's top 10
    vector_unavailable: bool = False


def matcher(answer: Answer) -> Callable[[Row], bool]:
    def is_answer(row: Row) -> bool:
        return answer.matches(row.repo, row.path, row.qualified_name, row.start_line, row.end_line)

    return is_answer


async def evaluate_query(
    stack: Stack,
    query: Query,
    index: RowIndex,
    file_chars: dict[tuple[str, str], int],
    sweep: Sweep,
) -> Outcome:
    out = Outcome(query)
    is_answer = matcher(query.answer)
    for name in SINGLE_STREAMS:
        reply = await search(stack.stub, query.text, streams=(name,), top_k=TOP_K)
        out.ranks[name] = first_rank(reply.rows, is_answer)
    fused = await search(stack.stub, query.text, top_k=TOP_K)
    out.ranks[FUSED] = first_rank(fused.rows, is_answer)
    out.vector_unavailable = fused.streams["vector"] != "ok"
    out.result_chars = [row.chars for row in fused.rows]
    files = {(row.repo, row.path) for row in fused.rows}
    out.whole_file_chars = sum(file_chars.get(f, 0) for f in files)

    scoped = await search(
        stack.stub, query.text, repo=query.answer.repo, include_graph=True, top_k=TOP_K
    )
    out.ranks[SCOPED] = first_rank(scoped.rows, is_answer)
    bundle = scoped.rows + scoped.graph
    out.ranks[GRAPH] = first_rank(bundle, is_answer)
    out.graph_hit = out.ranks[GRAPH] is not None

    candidates = await collect(
        stack.pool,
        stack.embedder,
        query.text,
        max(sweep.caps),
    )
    for k, cap in sweep.points():
        ids = fused_ids(candidates, k, cap)
        out.sweep[(k, cap)] = first_rank(rows_of(ids, index, TOP_K), is_answer)
    for summary_w, doc_w in sweep.weight_points():
        weights: dict[Unit, float] = {"summary": summary_w, "doc": doc_w}
        ids = fused_ids(candidates, DEFAULT_K, DEFAULT_CAP, weights)
        out.weight_sweep[(summary_w, doc_w)] = first_rank(rows_of(ids, index, TOP_K), is_answer)
    default = rows_of(fused_ids(candidates, DEFAULT_K, DEFAULT_CAP), index, TOP_K)
    rpc_keys = [(r.repo, r.path, r.start_line) for r in fused.rows]
    out.replay_agrees = rpc_keys == [(r.repo, r.path, r.start_line) for r in default]
    return out


async def evaluate(
    stack: Stack,
    queries: Sequence[Query],
    repos: Sequence[RepoCopy],
    index: RowIndex,
    *,
    sweep: Sweep | None = None,
    concurrency: int = 4,
    progress: Callable[[str], None] = print,
) -> list[Outcome]:
    """Every query, `concurrency` at a time (searches wait on PostgreSQL and the embedder,
    so a few in flight keep the two cores busy); outcomes in query order."""
    grid = sweep or Sweep()
    file_chars = {(repo.slug, path): n for repo in repos for path, n in repo.file_chars.items()}
    gate = asyncio.Semaphore(concurrency)
    done = 0
    started = time.perf_counter()

    async def one(query: Query) -> Outcome:
        nonlocal done
        async with gate:
            outcome = await evaluate_query(stack, query, index, file_chars, grid)
        done += 1
        if done % 100 == 0 or done == len(queries):
            rate = done / (time.perf_counter() - started)
            progress(f"  {done}/{len(queries)} queries ({rate:.1f}/s)")
        return outcome

    return list(await asyncio.gather(*(one(q) for q in queries)))


def missing_answers(queries: Sequence[Query], index: RowIndex) -> list[Query]:
    """Queries whose answer the index does not hold (a file the indexer skipped); they are
    reported and left out rather than counted as misses of the search."""
    code = {(row.repo, row.path, row.qualified_name) for row in index.values()}
    docs = {(row.repo, row.path) for row in index.values() if not row.qualified_name}
    missing = []
    for query in queries:
        answer = query.answer
        if answer.qualified_name:
            if answer.key() not in code:
                missing.append(query)
        elif (answer.repo, answer.path) not in docs:
            missing.append(query)
    return missing

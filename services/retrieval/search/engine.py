"""Search orchestration: embed, run the streams, fuse, rerank (gated), cut, cite, expand.

Streams and stores run concurrently, each on its own pooled connection
(RETRIEVAL_STREAMS_CONCURRENT=false awaits them one after another, for comparison).
Lexical and symbol queries start while the query is being embedded.
A stream that fails logs a warning and contributes nothing; the embedder being down or
slow empties only the vector stream and marks it unavailable. A stream whose statement the
server cancels at statement_timeout is left out the same way, unless no stream answers: then
the database is in trouble, not one query, and the search fails as unavailable.
Cancellation is never swallowed: cancelling the request cancels every task, and asyncpg
cancels the running PostgreSQL query when its task is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import asyncpg
import numpy as np
import numpy.typing as npt

from cograph_api.access_rules import Viewer
from retrieval import catalog
from retrieval.layers import Layer, Store, layers_of_unit, stores_for, units_for
from retrieval.search.code_notes import CodeNote
from retrieval.search.confidence import Confidence, Evidence, grade, verdict
from retrieval.search.fusion import (
    STREAM_NAMES,
    Fused,
    Provenance,
    StreamHit,
    StreamName,
    merge_lists,
)
from retrieval.search.graph import GraphResult, expand
from retrieval.search.pipeline import (
    Explanation,
    StageEffect,
    StageRun,
    Trace,
    effects,
    key_of,
    rank,
)
from retrieval.search.query import SearchQuery
from retrieval.search.query_text import has_text
from retrieval.search.ranking import plan_fusion
from retrieval.search.rerank import Reranker, RerankError, exact_symbol_match, should_rerank
from retrieval.search.search_settings import SearchSettings
from retrieval.search.search_sql import OwnerScope, Scope, hydrate, readable_owners
from retrieval.search.snapshot import Connect, Snapshot, Snapshots
from retrieval.search.snippets import make_snippet
from retrieval.search.streams import StreamTask, plan_streams, run_stream
from svckit.errors import DatabaseUnavailable, NotFound, database_outage
from svckit.replicas import PRIMARY, ReadRouter

log = logging.getLogger(__name__)

StreamState = Literal["ok", "unavailable", "skipped"]
# Reasons for an unavailable stream (SearchResponse.streams.reasons).
EMBEDDER_UNAVAILABLE = "embedder_unavailable"
STREAM_FAILED = "stream_failed"
STREAM_TIMED_OUT = "stream_timed_out"
Vector = npt.NDArray[np.float32]


@dataclass
class _Tally:
    """How a search's stream queries ended: how many answered, which timed out."""

    timeouts: list[BaseException] = field(default_factory=list)
    answered: int = 0


class QueryEmbedder(Protocol):
    async def embed(self, texts: list[str], timeout: float | None = None) -> Vector: ...


@dataclass
class SearchHit:
    id: str
    layer: Layer
    store: Store
    repo: str
    collection: str
    path: str
    qualified_name: str
    kind: str
    language: str
    start_line: int
    end_line: int
    commit: str
    snippet: str
    truncated: bool
    score: float
    provenance: list[Provenance]
    vector_score: float | None
    bm25_score: float | None
    symbol_score: float | None
    rerank_score: float | None = None
    name: str = ""  # bare name, for the exact-symbol rerank gate
    rerank_text: str = ""  # what a reranker reads (not returned)
    # With `explain`: each ranking stage's effect on this result (pipeline.effects).
    stages: list[StageEffect] = field(default_factory=list)
    # From its streams' evidence (search/confidence.py); a reranker does not change it.
    confidence: Confidence = "low"
    # The commons' notes anchored to this code, best first (search/code_notes.py).
    notes: list[CodeNote] = field(default_factory=list)


@dataclass
class SearchOutcome:
    query: str
    results: list[SearchHit]
    streams: dict[StreamName, StreamState]
    graph: GraphResult | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Why each unavailable stream is (embedder_unavailable, embedding_model_mismatch, ...).
    reasons: dict[StreamName, str] = field(default_factory=dict)
    explanation: Explanation | None = None  # with `explain`
    # The first result's confidence (None: no results), and whether no result is above
    # low (search/confidence.py). Judged before max_tokens leaves results out.
    confidence: Confidence | None = None
    no_good_answer: bool = False
    # Which database server answered, `primary` or `replica-N`, when the service reads
    # from replicas (svckit.replicas); empty otherwise.
    server: str = ""
    # Why results may lack their notes (search/code_notes.py); '' when none is missing.
    notes_reason: str = ""


@dataclass(frozen=True, slots=True)
class _Row:
    """A fused unit at one layer: what the top_k cut counts."""

    fused: Fused
    layer: Layer


def chunk_id(store: Store, row_id: int) -> str:
    return f"{store}:{row_id}"


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


class SearchEngine:
    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: QueryEmbedder | None,
        settings: SearchSettings,
        embed_timeout_s: float,
        reranker: Reranker | None = None,
        *,
        on_search: Callable[[SearchOutcome], None] | None = None,
        reads: ReadRouter | None = None,
    ) -> None:
        self._on_search = on_search  # told of each answered search (retrieval.metrics)
        # Every statement of one search reads one snapshot (search/snapshot.py), on the
        # server `reads` chooses (a replica, or the primary; svckit.replicas); half of each
        # server's pool may hold a snapshot's leader, the rest serve their streams.
        self._reads = reads
        self._max_open = max(1, settings.pool_size // 2)
        self._snapshots: dict[str, Snapshots] = {PRIMARY: Snapshots(pool, max_open=self._max_open)}
        self._embedder = embedder
        self._settings = settings
        self._embed_timeout_s = embed_timeout_s
        self._reranker = reranker

    async def _snapshots_for(self, viewer: Viewer) -> tuple[Snapshots, str]:
        if self._reads is None:
            return self._snapshots[PRIMARY], ""
        placement = await self._reads.for_read(viewer.principal_id or "")
        snapshots = self._snapshots.get(placement.name)
        if snapshots is None or snapshots.pool is not placement.pool:
            # A replica's pool is made (or made again) by the replica check.
            snapshots = Snapshots(placement.pool, max_open=self._max_open)
            self._snapshots[placement.name] = snapshots
        return snapshots, placement.name

    async def search(self, query: SearchQuery, viewer: Viewer) -> SearchOutcome:
        snapshots, server = await self._snapshots_for(viewer)
        async with snapshots.open() as snapshot:
            outcome = await self._search(query, viewer, snapshot)
        outcome.server = server
        if self._on_search is not None:
            self._on_search(outcome)
        return outcome

    async def _search(
        self, query: SearchQuery, viewer: Viewer, snapshot: Snapshot
    ) -> SearchOutcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        await self._check_scope(query, viewer, snapshot.leader)
        scope = Scope(viewer, query.repo, query.collection, query.as_of, query.since, query.until)
        stores = stores_for(query.layers)
        units = {store: units_for(store, query.layers) for store in stores}
        tasks = plan_streams(units, query.streams, has_text(query.text))
        states: dict[StreamName, StreamState] = {
            name: "ok" if any(t.stream == name for t in tasks) else "skipped"
            for name in STREAM_NAMES
        }

        phase = time.perf_counter()
        reasons: dict[StreamName, str] = {}
        hits = await self._run_streams(
            snapshot, query.text, tasks, scope, states=states, timings=timings, reasons=reasons
        )
        timings["streams"] = _ms(phase)

        phase = time.perf_counter()
        lists = {
            store: {
                name: merge_lists([hits[t] for t in tasks if t.store == store and t.stream == name])
                for name in STREAM_NAMES
                if any(t.store == store and t.stream == name for t in tasks)
            }
            for store in stores
        }
        plan = plan_fusion(
            query.text,
            self._settings.rrf_k,
            self._settings.candidate_cap,
            self._settings.fusion,
            self._settings.layer_weights,
            skip=query.skip_stages,
        )
        trace = Trace() if query.explain else None
        rows = [
            _Row(item, layer)
            for item in rank(lists, plan, trace)
            for layer in layers_of_unit(item.store, item.unit, query.layers)
        ]
        timings["fuse"] = _ms(phase)

        # The gate's cheap conditions first, so a search that will not be reranked hydrates
        # only top_k rows. Exact matches are pinned first, so the first row tells whether
        # the symbol stream found one; a match it could not see (the stream skipped) is
        # checked on the hydrated window.
        reranker = self._reranker if not query.skip_rerank else None
        gate = self._settings.rerank
        pinned = bool(rows) and rows[0].fused.exact > 0
        could_rerank = reranker is not None and should_rerank(
            gate, query.text, len(rows), exact_symbol_match=pinned
        )
        rerank_window = min(len(rows), gate.top_n) if could_rerank else 0
        phase = time.perf_counter()
        results = await self._hydrate(
            snapshot, rows[: max(query.top_k, rerank_window)], query, scope, trace
        )
        timings["hydrate"] = _ms(phase)

        named = any(
            exact_symbol_match(query.text, hit.qualified_name, hit.name)
            for hit in results[:rerank_window]
            if hit.store == "code"
        )
        if reranker is not None and could_rerank and not named:
            phase = time.perf_counter()
            results = await self._rerank(reranker, query.text, results, rerank_window, trace)
            timings["rerank"] = _ms(phase)
        results = results[: query.top_k]
        explanation = (
            Explanation(plan.query_class, tuple(trace.runs)) if trace is not None else None
        )

        graph: GraphResult | None = None
        if query.include_graph and query.repo is not None:
            phase = time.perf_counter()
            seeds = [int(hit.id.split(":", 1)[1]) for hit in results if hit.store == "code"]
            graph = await expand(snapshot.leader, seeds, query.repo, viewer)
            timings["graph"] = _ms(phase)
        judged = verdict([hit.confidence for hit in results])
        timings["total"] = _ms(started)
        return SearchOutcome(
            query.text,
            results,
            states,
            graph,
            timings,
            reasons,
            explanation,
            confidence=judged.confidence,
            no_good_answer=judged.no_good_answer,
        )

    async def _check_scope(
        self, query: SearchQuery, viewer: Viewer, conn: asyncpg.Connection
    ) -> None:
        """Unknown and unreadable look the same (NOT_FOUND), so nothing leaks."""
        if query.repo is not None:
            if not await catalog.repository_readable_by(conn, query.repo, viewer):
                raise NotFound(f"no repository {query.repo}")
        elif query.collection is not None and not await catalog.collection_readable_by(
            conn, query.collection, viewer
        ):
            raise NotFound(f"no collection {query.collection}")

    async def _embed(
        self, text: str, timings: dict[str, float], failed: dict[StreamName, str]
    ) -> Vector | None:
        """The query vector, or None (and why in `failed`) when there is none to use."""
        if self._embedder is None:
            failed["vector"] = EMBEDDER_UNAVAILABLE
            return None
        phase = time.perf_counter()
        try:
            vectors = await self._embedder.embed([text], timeout=self._embed_timeout_s)
        except Exception as err:  # any failure empties only the vector stream
            log.warning(
                "query embedding failed; vector stream unavailable", extra={"error": str(err)}
            )
            # A stable reason when the failure names one (embedding_model_mismatch).
            failed["vector"] = str(getattr(err, "reason", "") or EMBEDDER_UNAVAILABLE)
            return None
        finally:
            timings["embed"] = _ms(phase)
        return vectors[0]

    async def _guarded(
        self,
        task: StreamTask,
        *,
        connect: Connect,
        text: str,
        scope: Scope,
        vector: Vector | None,
        failed: dict[StreamName, str],
        timings: dict[str, float],
        tally: _Tally,
        owners: Mapping[Store, OwnerScope] | None = None,
    ) -> list[StreamHit]:
        """The task's hits, or none when it fails (recorded in `failed`, and counted in
        `tally`)."""
        phase = time.perf_counter()
        try:
            hits = await run_stream(
                connect,
                task,
                scope=scope,
                query=text,
                vector=vector,
                cap=self._settings.candidate_cap,
                owners=owners,
            )
            tally.answered += 1
            return hits
        except Exception as err:  # CancelledError is a BaseException: it propagates
            if isinstance(err, asyncpg.QueryCanceledError):
                # One slow query (a name with many trigram neighbours, a large scope) must
                # not take the other streams' answer with it; _run_streams decides whether
                # the database as a whole is in trouble.
                log.warning("search stream timed out", extra={"stream": task.label})
                failed.setdefault(task.stream, STREAM_TIMED_OUT)
                tally.timeouts.append(err)
                return []
            if database_outage(err) is not None:
                # Without its database a search has no answer, not a degraded one: fail the
                # request (UNAVAILABLE) instead of returning an empty list marked degraded.
                raise
            log.warning("search stream failed", extra={"stream": task.label, "error": str(err)})
            failed.setdefault(task.stream, STREAM_FAILED)
            return []
        finally:
            timings[task.label] = _ms(phase)

    async def _owners(
        self,
        conn: asyncpg.Connection,
        tasks: Sequence[StreamTask],
        scope: Scope,
        failed: dict[StreamName, str],
        timings: dict[str, float],
    ) -> dict[Store, OwnerScope] | None:
        """The readable owners of the vector streams' stores, once for all of them (on the
        snapshot's leader), or None (and the vector stream failed) when that fails."""
        phase = time.perf_counter()
        try:
            return await readable_owners(conn, sorted({t.store for t in tasks}), scope)
        except Exception as err:  # as a stream's own failure (_guarded)
            if database_outage(err) is not None:
                raise
            log.warning("readable owners failed", extra={"error": str(err)})
            failed.setdefault("vector", STREAM_FAILED)
            return None
        finally:
            timings["owners"] = _ms(phase)

    async def _run_streams(
        self,
        snapshot: Snapshot,
        text: str,
        tasks: Sequence[StreamTask],
        scope: Scope,
        *,
        states: dict[StreamName, StreamState],
        timings: dict[str, float],
        reasons: dict[StreamName, str],
    ) -> dict[StreamTask, list[StreamHit]]:
        """Runs the tasks; a stream that fails is marked unavailable in `states`, with why
        in `reasons`."""
        failed: dict[StreamName, str] = {}
        tally = _Tally()
        vector_tasks = [t for t in tasks if t.stream == "vector"]
        other_tasks = [t for t in tasks if t.stream != "vector"]
        results: dict[StreamTask, list[StreamHit]] = {}

        if not self._settings.streams_concurrent:
            vector, owners = None, None
            if vector_tasks:
                vector = await self._embed(text, timings, failed)
                owners = await self._owners(snapshot.leader, vector_tasks, scope, failed, timings)
                if owners is None:
                    vector = None
            for task in tasks:
                results[task] = await self._guarded(
                    task,
                    connect=snapshot.connection,
                    text=text,
                    scope=scope,
                    vector=vector,
                    failed=failed,
                    tally=tally,
                    timings=timings,
                    owners=owners,
                )
        else:

            async def vector_branch() -> None:
                # The owners are read on the leader while the query is embedded.
                vector, owners = await asyncio.gather(
                    self._embed(text, timings, failed),
                    self._owners(snapshot.leader, vector_tasks, scope, failed, timings),
                )
                if vector is None or owners is None:
                    return
                async with asyncio.TaskGroup() as group:
                    handles = {
                        t: group.create_task(
                            self._guarded(
                                t,
                                connect=snapshot.connection,
                                text=text,
                                scope=scope,
                                vector=vector,
                                failed=failed,
                                tally=tally,
                                timings=timings,
                                owners=owners,
                            )
                        )
                        for t in vector_tasks
                    }
                for t, handle in handles.items():
                    results[t] = handle.result()

            # A TaskGroup cancels every child when the request is cancelled, and waits for
            # them, so no query outlives the request.
            async with asyncio.TaskGroup() as group:
                if vector_tasks:
                    group.create_task(vector_branch())
                others = {
                    t: group.create_task(
                        self._guarded(
                            t,
                            connect=snapshot.connection,
                            text=text,
                            scope=scope,
                            vector=None,
                            failed=failed,
                            tally=tally,
                            timings=timings,
                        )
                    )
                    for t in other_tasks
                }
            for t, handle in others.items():
                results[t] = handle.result()
        if tally.timeouts and not tally.answered:
            # Every query that ran was cancelled at statement_timeout: the database, not one
            # query, is slow; an empty answer would pass for "nothing found".
            first = tally.timeouts[0]
            raise database_outage(first) or DatabaseUnavailable(str(first)) from first
        for name, reason in failed.items():
            states[name] = "unavailable"
            reasons[name] = reason
        return {t: results.get(t, []) for t in tasks}

    async def _hydrate(
        self,
        snapshot: Snapshot,
        rows: Sequence[_Row],
        query: SearchQuery,
        scope: Scope,
        trace: Trace | None = None,
    ) -> list[SearchHit]:
        by_store: dict[Store, list[int]] = {}
        for row in rows:
            ids = by_store.setdefault(row.fused.store, [])
            if row.fused.id not in ids:
                ids.append(row.fused.id)

        async def fetch(store: Store, ids: list[int]) -> tuple[Store, dict[int, asyncpg.Record]]:
            async with snapshot.connection() as conn:
                return store, await hydrate(conn, store, ids, scope)

        fetched = dict(await asyncio.gather(*(fetch(s, ids) for s, ids in by_store.items())))
        hits: list[SearchHit] = []
        for row in rows:
            record = fetched[row.fused.store].get(row.fused.id)
            if record is not None:  # never, on one snapshot; kept as a guard
                hit = _hit(row, record, query)
                if trace is not None:
                    hit.stages = effects(trace, key_of(row.fused))
                hits.append(hit)
        return hits

    async def _rerank(
        self,
        reranker: Reranker,
        text: str,
        results: list[SearchHit],
        window: int,
        trace: Trace | None = None,
    ) -> list[SearchHit]:
        head, tail = results[:window], results[window:]
        try:
            limit = self._settings.rerank.doc_chars
            scores = await reranker.score(text, [hit.rerank_text[:limit] for hit in head])
        except (TimeoutError, RerankError) as err:
            log.warning("rerank failed; keeping the fused order", extra={"error": str(err)})
            if trace is not None:
                trace.runs.append(StageRun("rerank", False, f"failed, fused order kept: {err}"))
            return results
        for hit, value in zip(head, scores, strict=True):
            hit.rerank_score = value
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
        reranked = [head[i] for i in order] + tail
        # `score` must agree with the order a caller sees: a result the reranker moved
        # carries the fused score of the place it took; rerank_score says why it moved.
        places = sorted((hit.score for hit in head), reverse=True)
        before = {id(hit): (i, hit.score) for i, hit in enumerate(head, 1)}
        for i, (hit, place) in enumerate(zip(reranked, places, strict=False), 1):
            if trace is not None:
                rank_before, score_before = before[id(hit)]
                hit.stages.append(StageEffect("rerank", rank_before, score_before, i, place))
            hit.score = place
        if trace is not None:
            trace.runs.append(StageRun("rerank", True, f"the first {window} reordered"))
        return reranked


_MARKDOWN = (".md", ".markdown", ".mdx")


def _doc_title(record: asyncpg.Record) -> str:
    return " > ".join(record["heading_path"] or [])


def _hit(row: _Row, record: asyncpg.Record, query: SearchQuery) -> SearchHit:
    fused, layer = row.fused, row.layer
    if fused.store == "code":
        body = record["body"] or ""
        if layer == "ast":
            text = record["signature"] or body.split("\n", 1)[0]
        elif layer == "ast_summary":
            text = record["summary"] or ""
        else:
            text = body
        qualified, name, kind = record["qualified_name"], record["name"], record["kind"]
        language = record["language"]
        rerank_text = f"{qualified}\n{text}"
    else:
        text = record["body"] or ""
        qualified = _doc_title(record)
        name, kind = "", "section"
        language = "markdown" if record["path"].lower().endswith(_MARKDOWN) else "text"
        rerank_text = f"{qualified}\n{text}" if qualified else text
    # Centred on the first literal match whichever stream found the hit; a vector-only hit
    # with no literal match falls back to the head.
    snippet = make_snippet(text, query.text, query.snippet_chars)
    return SearchHit(
        id=chunk_id(fused.store, fused.id),
        layer=layer,
        store=fused.store,
        repo=record["repo"],
        collection=record["collection"],
        path=record["path"],
        qualified_name=qualified,
        kind=kind,
        language=language,
        start_line=int(record["start_line"]),
        end_line=int(record["end_line"]),
        commit=record["commit"],
        snippet=snippet.text,
        truncated=snippet.truncated,
        score=fused.score,
        provenance=list(fused.provenance),
        vector_score=fused.raw("vector"),
        bm25_score=fused.raw("lexical"),
        symbol_score=fused.raw("symbol"),
        name=name,
        rerank_text=rerank_text,
        confidence=grade(Evidence.of(fused.provenance, exact=fused.exact > 0)),
    )

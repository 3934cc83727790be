"""Composition root of the retrieval service."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import grpc
from opentelemetry.sdk.trace import TracerProvider

from cograph.commons.v1 import commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api.cursors import CursorCodec
from cograph_api.embedder_client import CircuitBreaker, EmbedderClient
from cograph_api.embedding_space import EmbeddingSpace, health_reporter
from retrieval.embedding_space import SPEC as SPACE_SPEC
from retrieval.indexing.freshness import HeadProbe
from retrieval.indexing.indexer import Indexer
from retrieval.indexing.jobs import JobManager
from retrieval.indexing.pipeline import TextEmbedder
from retrieval.indexing.push_sync import PushSync
from retrieval.indexing.source_policy import LocalPolicy
from retrieval.indexing.summaries import ExtractiveSummarizer, OpenAISummarizer, Summarizer
from retrieval.indexing.sync import Schedule, Syncer, recording_syncs
from retrieval.metrics import RetrievalMetrics
from retrieval.search.code_notes import NotesLookup
from retrieval.search.engine import SearchEngine
from retrieval.search.rerank import CrossEncoderReranker, Reranker, build_reranker
from retrieval.servicer import RetrievalServicer
from retrieval.settings import RetrievalSettings, SummarizerSettings
from retrieval.upgrades import queue_reindex_after_upgrade
from svckit.clients import dial
from svckit.config import ensure_writable_dir
from svckit.db import DbTimeouts, create_pool, ensure_extensions
from svckit.disk import DiskWatch
from svckit.internal_auth import TokenSigner, TokenVerifier
from svckit.metrics import ServiceMetrics
from svckit.migrations import migrate
from svckit.replicas import ReadRouter
from svckit.server import GrpcHost

log = logging.getLogger(__name__)

SERVICE_NAME = retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# The commons' breaker: after this many failed notes calls in a row, answers skip the
# commons for the cool-down, then one probe goes through (the embedder breaker's kind).
NOTES_BREAKER_FAILURES = 3
NOTES_BREAKER_COOLDOWN_S = 5.0


def build_summarizer(settings: SummarizerSettings) -> Summarizer:
    if settings.provider == "openai":
        assert settings.base_url is not None
        return OpenAISummarizer(
            settings.base_url,
            settings.model,
            settings.api_key,
            timeout_s=settings.timeout_s,
            concurrency=settings.concurrency,
        )
    return ExtractiveSummarizer()


@dataclass
class RetrievalApp:
    host: GrpcHost
    pool: asyncpg.Pool
    jobs: JobManager
    indexer: Indexer
    summarizer: Summarizer
    channel: grpc.aio.Channel | None
    engine: SearchEngine
    reranker: Reranker | None = None
    index_pool: asyncpg.Pool | None = None  # the indexer's, with its longer statement budget
    space: EmbeddingSpace | None = None  # the embedder's model against the stored vectors'
    sync: Syncer | None = None  # None: RETRIEVAL_SYNC_INTERVAL_S=0
    push_sync: PushSync | None = None  # what the push webhooks queue (SyncSource)
    reads: ReadRouter | None = None  # read-only requests on replicas (svckit.replicas)
    commons_channel: grpc.aio.Channel | None = None  # notes beside code; None: no COMMONS_ADDR

    @property
    def port(self) -> int:
        return self.host.port

    async def stop(self) -> None:
        await self.host.stop()
        if self.sync is not None:
            await self.sync.stop()
        if self.push_sync is not None:
            await self.push_sync.stop()
        if self.space is not None:
            await self.space.stop()
        await self.jobs.close()
        if self.reads is not None:
            await self.reads.stop()
        await self.summarizer.close()
        if self.reranker is not None:
            await self.reranker.close()
        await self.pool.close()
        if self.index_pool is not None:
            await self.index_pool.close()
        if self.channel is not None:
            await self.channel.close(None)
        if self.commons_channel is not None:
            await self.commons_channel.close(None)


async def start_retrieval(
    settings: RetrievalSettings,
    tracer_provider: TracerProvider | None = None,
    *,
    embedder: TextEmbedder | None = None,
    summarizer: Summarizer | None = None,
) -> RetrievalApp:
    """Migrates, connects, serves. `embedder`/`summarizer` override the configured ones."""
    # Clones and checkouts go there: a directory it cannot write stops the start in one line.
    ensure_writable_dir(settings.data_dir, "COGRAPH_DATA_DIR")
    await ensure_extensions(settings.database_url)
    await migrate(settings.database_url, "retrieval", MIGRATIONS)
    # A concurrent search holds one connection per stream and store (up to 8).
    pool = await create_pool(settings.database_url, max_size=settings.search.pool_size)
    # Indexing statements (batch writes with HNSW upkeep, linking a whole repository) may
    # run for minutes; requests must fail in seconds on a frozen database. Two pools, two
    # budgets (COGRAPH_DB_INDEX_STATEMENT_TIMEOUT_S for this one).
    index_pool = await create_pool(
        settings.database_url,
        max_size=2 + 2 * settings.index.max_concurrent_jobs,
        timeouts=DbTimeouts.from_env().for_indexing(),
    )
    # With COGRAPH_DATABASE_READ_URL, read-only requests go to replicas that are caught up
    # (and have replayed the caller's own writes); the replicas' pools are opened by the
    # check, so a replica that is down does not stop the start.
    reads = (
        ReadRouter(pool, settings.replicas, writes_table="retrieval_principal_writes")
        if settings.replicas.urls
        else None
    )
    metrics = ServiceMetrics()
    metrics.pools.watch(pool, "requests")
    metrics.pools.watch(index_pool, "indexing")
    retrieval_metrics = RetrievalMetrics(metrics)
    # Always dialled: the embedder's model is compared with the stored vectors' even when
    # tests hand in an embedder of their own.
    channel: grpc.aio.Channel | None = dial(
        settings.embedder_addr,
        signer=TokenSigner(settings.internal_secret),
        tracer_provider=tracer_provider,
    )
    assert channel is not None
    client = EmbedderClient(channel, settings.embedder_timeout_s)
    # Which model the stored vectors come from, against the embedder's: checked at first
    # contact and every EMBEDDING_SPACE_CHECK_S, and on every embedding (a query's vector
    # of another model is never compared with the stored ones, nor written beside them).
    space = EmbeddingSpace(pool, SPACE_SPEC, client, check_s=settings.embedding_space_check_s)
    index_embedder: TextEmbedder
    if embedder is None:
        embedder = client
        # Indexing waits in the embedder's bulk lane, so searches never queue behind it.
        index_embedder = space.checked(client.for_bulk())
    else:
        index_embedder = embedder
    summarizer = summarizer or build_summarizer(settings.summarizer)
    index = settings.index
    jobs = JobManager(
        pool,
        index.max_concurrent_jobs,
        lease_s=index.job_lease_s,
        heartbeat_s=index.job_heartbeat_s,
        max_attempts=index.job_max_attempts,
        poll_s=index.job_poll_s,
        observer=retrieval_metrics,
    )
    retrieval_metrics.watch_running(lambda: jobs.running)
    disk = DiskWatch(settings.disk) if settings.disk is not None else None
    indexer = Indexer(
        index_pool,
        index_embedder,
        settings.index,
        summarizer,
        settings.data_dir,
        space=space,
        disk=disk,
    )
    reranker = build_reranker(settings.search.rerank, channel)
    if isinstance(reranker, CrossEncoderReranker) and not await reranker.available():
        log.warning("the embedder has no cross-encoder (EMBEDDER_RERANKER_PATH); reranking off")
        reranker = None
    # The query-time deadline is the embedder timeout (2 s by default), not the indexing one.
    # Queries go through a circuit breaker (indexing waits instead, RETRIEVAL_EMBEDDER_WAIT_S):
    # while the embedder is down, searches answer without the vector stream at once.
    query_embedder: TextEmbedder = embedder
    if isinstance(embedder, EmbedderClient):
        breaker = settings.embedder_breaker
        query_embedder = space.checked(
            embedder.with_breaker(
                CircuitBreaker(breaker.failures, breaker.cooldown_s, name="retrieval search")
            )
        )
    engine = SearchEngine(
        pool,
        query_embedder,
        settings.search,
        settings.embedder_timeout_s,
        reranker,
        on_search=retrieval_metrics.observe_search,
        reads=reads,
    )
    # Freshness lookups reach sources too: they obey the same host policy.
    heads = HeadProbe(
        settings.head_check_timeout_s,
        settings.head_cache_s,
        hosts=indexer.host_policy,
        credentials=indexer.credentials,
    )
    push_sync = PushSync(pool, jobs)
    # Notes beside code: the commons is asked as the caller (the request's principal is
    # signed into each call), within RETRIEVAL_NOTES_TIMEOUT_S, behind a breaker.
    commons_channel: grpc.aio.Channel | None = None
    notes: NotesLookup | None = None
    if settings.commons_addr:
        commons_channel = dial(
            settings.commons_addr,
            signer=TokenSigner(settings.internal_secret),
            default_timeout_s=settings.notes_timeout_s,
            tracer_provider=tracer_provider,
        )
        notes = NotesLookup(
            commons_pb2_grpc.CommonsServiceStub(commons_channel),
            settings.notes_timeout_s,
            CircuitBreaker(NOTES_BREAKER_FAILURES, NOTES_BREAKER_COOLDOWN_S, name="commons notes"),
        )
    servicer = RetrievalServicer(
        pool,
        jobs,
        indexer,
        engine=engine,
        search_settings=settings.search,
        heads=heads,
        cursors=CursorCodec.from_secret(settings.internal_secret),
        maintenance_pool=index_pool,
        disk=disk,
        push_sync=push_sync,
        reads=reads,
        notes=notes,
    )

    def register(server: grpc.aio.Server) -> None:
        retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(servicer, server)

    host = GrpcHost(
        [SERVICE_NAME],
        [register],
        settings.address,
        tracer_provider,
        verifier=TokenVerifier(settings.internal_secret),
        metrics=metrics,
        metrics_settings=settings.metrics,
    )
    await host.start()
    report = health_reporter(host)
    await report(None)
    space.on_verdict = report
    space.start()
    if reads is not None:
        await reads.check()  # the replicas' first state before the first request
        reads.start()
    # Workers take queued jobs, and jobs whose worker died, from index_jobs (any replica's).
    # A run the sync or a push webhook asked for notes when it published (last_synced_at).
    jobs.start(recording_syncs(pool, servicer.run_job))
    try:
        await queue_reindex_after_upgrade(pool, jobs)
    except (asyncpg.PostgresError, OSError) as err:  # the next start queues them again
        log.warning("could not queue the re-index after an upgrade", extra={"error": str(err)})
    sync = None
    if settings.sync.enabled:
        sync = Syncer(
            pool,
            jobs,
            # The sync's own probe: no memory (each check sees the source as it is now), its
            # own parallelism, and a writer's authority over remote hosts (sync.py).
            HeadProbe(
                settings.head_check_timeout_s,
                0.0,
                settings.sync.concurrency,
                hosts=indexer.host_policy,
                credentials=indexer.credentials,
                # Remote heads as a key that is not an admin (sync.py says why).
                admin=False,
            ),
            LocalPolicy(
                "any", settings.data_dir, settings.index.local_roots, settings.index.protected_dirs
            ),
            Schedule(settings.sync.interval_s, settings.sync.backoff_max_s),
            concurrency=settings.sync.concurrency,
            check_timeout_s=settings.head_check_timeout_s,
        )
        sync.start()
    await host.set_serving()
    log.info(
        "retrieval serving",
        extra={
            "port": host.port,
            "metrics": host.metrics_address,
            "summarizer": summarizer.name,
            "embedder": settings.embedder_addr,
            "reranker": reranker.name if reranker is not None else "none",
        },
    )
    return RetrievalApp(
        host,
        pool,
        jobs,
        indexer,
        summarizer,
        channel,
        engine,
        reranker,
        index_pool,
        space,
        sync,
        push_sync,
        reads,
        commons_channel,
    )

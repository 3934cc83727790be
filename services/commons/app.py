"""Composition root of the commons service."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import grpc
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import Gauge

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.cursors import CursorCodec
from cograph_api.embedder_client import CircuitBreaker, EmbedderClient
from cograph_api.embedding_space import EmbeddingSpace, health_reporter
from commons.anchor_watch import AnchorWatch
from commons.anchors import AnchorDesk
from commons.backfill import BackfillWorker
from commons.board import NotesBoard, SearchConfig
from commons.code_notes import CodeNotes
from commons.embedding import NoteEmbedder
from commons.embedding_space import SPEC as SPACE_SPEC
from commons.servicer import CommonsServicer
from commons.settings import CommonsSettings
from commons.store import CommonsStore
from svckit.clients import dial
from svckit.db import create_pool, ensure_extensions
from svckit.disk import DiskWatch
from svckit.internal_auth import TokenSigner, TokenVerifier
from svckit.metrics import ServiceMetrics
from svckit.migrations import migrate
from svckit.replicas import ReadRouter
from svckit.server import GrpcHost

log = logging.getLogger(__name__)

SERVICE_NAME = commons_pb2.DESCRIPTOR.services_by_name["CommonsService"].full_name
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# How long shutdown waits for in-flight note embeds and search-log writes.
DRAIN_S = 5.0


@dataclass
class CommonsApp:
    host: GrpcHost
    pool: asyncpg.Pool
    board: NotesBoard
    note_embedder: NoteEmbedder
    backfill: BackfillWorker
    channel: grpc.aio.Channel | None  # owned only when we dialled it
    space: EmbeddingSpace | None = None  # the embedder's model against the stored vectors'
    retrieval_channel: grpc.aio.Channel | None = None  # anchors' resolution and checks
    anchor_watch: AnchorWatch | None = None
    reads: ReadRouter | None = None  # searches and reads on replicas (svckit.replicas)

    @property
    def port(self) -> int:
        return self.host.port

    async def stop(self) -> None:
        await self.host.stop()
        if self.anchor_watch is not None:
            await self.anchor_watch.stop()
        if self.space is not None:
            await self.space.stop()
        await self.backfill.stop()
        await self.note_embedder.tasks.drain(DRAIN_S)
        await self.board.log_tasks.drain(DRAIN_S)
        if self.channel is not None:
            await self.channel.close(None)
        if self.retrieval_channel is not None:
            await self.retrieval_channel.close(None)
        if self.reads is not None:
            await self.reads.stop()
        await self.pool.close()


async def start_commons(
    settings: CommonsSettings,
    embedder_channel: grpc.aio.Channel | None = None,
    tracer_provider: TracerProvider | None = None,
) -> CommonsApp:
    """Migrates, wires the board, serves, and starts the backfill (which runs at once)."""
    await ensure_extensions(settings.database_url)
    await migrate(settings.database_url, "commons", MIGRATIONS)
    pool = await create_pool(settings.database_url, max_size=settings.db_pool_max)
    owned = None
    if embedder_channel is None:
        owned = embedder_channel = dial(
            settings.embedder_addr,
            # The backfill signs as nobody: it runs outside any request.
            signer=TokenSigner(settings.internal_secret),
            default_timeout_s=settings.embed_write_timeout_s,
            tracer_provider=tracer_provider,
        )
    client = EmbedderClient(embedder_channel, timeout_s=settings.embedder_timeout_s)
    # With COGRAPH_DATABASE_READ_URL, searches and reads go to replicas that are caught up
    # (and have replayed the caller's own writes and every moderation); the check opens
    # their pools, so a replica that is down does not stop the start.
    reads = (
        ReadRouter(pool, settings.replicas, writes_table="commons_principal_writes")
        if settings.replicas.urls
        else None
    )
    store = CommonsStore(pool, reads)
    # Which model the notes' vectors come from, against the embedder's: checked at first
    # contact, every EMBEDDING_SPACE_CHECK_S and on every embedding; vectors of another
    # model are neither searched with nor written.
    space = EmbeddingSpace(pool, SPACE_SPEC, client, check_s=settings.embedding_space_check_s)
    note_embedder = NoteEmbedder(
        store,
        space.checked(client),
        settings.embed_write_timeout_s,
        settings.backfill_batch,
        space,
    )
    # Searches go through a breaker: while the embedder is down they answer 503 at once
    # instead of after EMBEDDER_TIMEOUT_S; note writes and the backfill keep their own path.
    breaker = settings.embedder_breaker
    query_client = space.checked(
        client.with_breaker(
            CircuitBreaker(breaker.failures, breaker.cooldown_s, name="commons search")
        )
    )
    board = NotesBoard(
        store,
        query_client,
        note_embedder,
        settings.limits,
        SearchConfig(
            limit=settings.search_limit,
            snippet=settings.body_snippet,
            weights=settings.weights,
            embed_timeout_s=settings.embedder_timeout_s,
            two_stage_threshold=settings.two_stage_threshold,
            two_stage_k=settings.two_stage_k,
            note_count_ttl_s=settings.note_count_ttl_s,
            filter_first_max=settings.filter_first_max,
        ),
        cursors=CursorCodec.from_secret(settings.internal_secret),
    )
    # Anchors are resolved as the caller (the current request's principal is signed into
    # each call) and re-checked as the commons itself (anchor_watch).
    retrieval_channel = dial(
        settings.retrieval_addr,
        signer=TokenSigner(settings.internal_secret),
        default_timeout_s=settings.retrieval_timeout_s,
        tracer_provider=tracer_provider,
    )
    retrieval = retrieval_pb2_grpc.RetrievalServiceStub(retrieval_channel)
    anchor_watch = AnchorWatch(
        pool,
        retrieval,
        interval_s=settings.anchor_check_interval_s,
        batch=settings.anchor_check_batch,
        timeout_s=settings.retrieval_timeout_s,
    )
    board.attach_anchors(AnchorDesk(pool, retrieval, settings.retrieval_timeout_s), anchor_watch)
    disk = DiskWatch(settings.disk) if settings.disk is not None else None
    servicer = CommonsServicer(board, CodeNotes(pool, settings.weights), disk, reads)
    metrics = _metrics(pool, store)

    def register(server: grpc.aio.Server) -> None:
        commons_pb2_grpc.add_CommonsServiceServicer_to_server(servicer, server)

    host = GrpcHost(
        [SERVICE_NAME],
        [register],
        settings.address,
        tracer_provider,
        verifier=TokenVerifier(settings.internal_secret),
        metrics=metrics,
        metrics_settings=settings.metrics,
    )
    try:
        await host.start()
    except Exception:
        if owned is not None:
            await owned.close(None)
        await retrieval_channel.close(None)
        await pool.close()
        raise
    report = health_reporter(host)
    await report(None)
    space.on_verdict = report
    space.start()
    backfill = BackfillWorker(note_embedder, settings.backfill_interval_s)
    backfill.start()
    anchor_watch.start()
    if reads is not None:
        await reads.check()  # the replicas' first state before the first request
        reads.start()
    await host.set_serving()
    log.info("commons serving", extra={"port": host.port, "metrics": host.metrics_address})
    return CommonsApp(
        host,
        pool,
        board,
        note_embedder,
        backfill,
        owned,
        space,
        retrieval_channel,
        anchor_watch,
        reads,
    )


def _metrics(pool: asyncpg.Pool, store: CommonsStore) -> ServiceMetrics:
    """The commons' series: its RPCs and pool (svckit.metrics), and the embedding backlog,
    counted when scraped (an indexed count: posts_unembedded)."""
    metrics = ServiceMetrics()
    metrics.pools.watch(pool, "requests")
    backlog = Gauge(
        "cograph_commons_embedding_backlog",
        "Notes without a vector yet, so not found by search until the backfill embeds them "
        "(counted at each scrape).",
        registry=metrics.registry,
    )

    async def count_backlog() -> None:
        backlog.set(await store.embedding_backlog())

    metrics.refreshers.append(count_backlog)
    return metrics

"""Composition root of the embedder service."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial

import grpc
from opentelemetry.sdk.trace import TracerProvider

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from embedder.backends import Backend, load_backend
from embedder.batcher import Batcher
from embedder.cross_encoder import load_cross_encoder
from embedder.limits import EmbedLimits
from embedder.metrics import EmbedderMetrics
from embedder.servicer import EmbedderServicer
from embedder.settings import EmbedderSettings
from svckit.config import ensure_writable_dir
from svckit.internal_auth import TokenVerifier
from svckit.metrics import ServiceMetrics
from svckit.server import GrpcHost

log = logging.getLogger(__name__)

SERVICE_NAME = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name


@dataclass
class EmbedderApp:
    host: GrpcHost
    batcher: Batcher
    backend: Backend

    @property
    def port(self) -> int:
        return self.host.port

    async def stop(self) -> None:
        await self.host.stop()
        await self.batcher.close()


async def start_embedder(
    settings: EmbedderSettings, tracer_provider: TracerProvider | None = None
) -> EmbedderApp:
    """Binds the port first (health NOT_SERVING), then loads and warms the model."""
    if settings.backend == "onnx-int8" and not any(settings.cache_dir.glob("*-int8-w.onnx")):
        # Nothing exported yet: the export is written there on first use, so a directory
        # that cannot be written must stop the start in one line, not fail the export with
        # a traceback. An image that ships its export (read-only, on Kubernetes) skips this.
        ensure_writable_dir(settings.cache_dir, "EMBEDDER_CACHE_DIR")
    loop = asyncio.get_running_loop()
    servicer_slot: list[EmbedderServicer] = []
    metrics = ServiceMetrics()
    embedder_metrics = EmbedderMetrics(metrics)

    def register(server: grpc.aio.Server) -> None:
        embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(_Deferred(servicer_slot), server)

    host = GrpcHost(
        [SERVICE_NAME],
        [register],
        settings.address,
        tracer_provider,
        verifier=TokenVerifier(settings.internal_secret),
        # Served from the start: a scrape during the model's load sees its RPCs refused.
        metrics=metrics,
        metrics_settings=settings.metrics,
    )
    await host.start()
    backend = await loop.run_in_executor(
        None,
        load_backend,
        settings.backend,
        settings.model_path,
        settings.cache_dir,
        settings.threads,
        settings.endpoint,
    )
    encode = partial(backend.encode, batch_size=settings.batch_size)
    bulk_backend = await loop.run_in_executor(None, _bulk_backend, settings, backend)
    bulk_encode = partial(bulk_backend.encode, batch_size=settings.bulk_batch_texts)
    # Warm-up: the first inference allocates and plans; do it before reporting SERVING.
    await loop.run_in_executor(None, encode, ["warm up the model", "def warm(): pass"])
    if bulk_backend is not backend:
        await loop.run_in_executor(None, bulk_encode, ["warm up the bulk lane"])
    batcher = Batcher(
        encode,
        max_texts=settings.batch_size,
        max_wait_s=settings.max_wait_ms / 1000,
        bulk_encode=bulk_encode,
        bulk_max_texts=settings.bulk_batch_texts,
        bulk_queue_texts=settings.bulk_queue_texts,
        observer=embedder_metrics.observe_batch,
    )
    embedder_metrics.watch_queues(batcher.queued_texts)
    batcher.start()
    limits = EmbedLimits(settings.max_batch_texts, settings.max_text_chars)
    reranker = await loop.run_in_executor(
        None, load_cross_encoder, settings.reranker_path, settings.threads
    )
    servicer_slot.append(
        EmbedderServicer(
            batcher,
            limits,
            backend.model_name,
            backend.dimension,
            backend.name,
            reranker=reranker,
        )
    )
    await host.set_serving()
    log.info(
        "embedder serving",
        extra={
            "port": host.port,
            "backend": backend.name,
            "model": backend.model_name,
            "metrics": host.metrics_address,
        },
    )
    return EmbedderApp(host, batcher, backend)


def _bulk_backend(settings: EmbedderSettings, backend: Backend) -> Backend:
    """The model the bulk lane runs: on onnx-int8 a second session of the same weights
    with EMBEDDER_BULK_THREADS threads, so indexing leaves cores to queries (which run on
    the first session meanwhile); torch sets its threads per process and openai is remote,
    so they share the one backend."""
    if backend.name != "onnx-int8" or settings.bulk_threads == settings.threads:
        return backend
    return load_backend(
        settings.backend,
        settings.model_path,
        settings.cache_dir,
        settings.bulk_threads,
        settings.endpoint,
    )


class _Deferred(embedder_pb2_grpc.EmbedderServiceServicer):
    """Answers UNAVAILABLE until the model is loaded; the port is bound before that."""

    def __init__(self, slot: list[EmbedderServicer]) -> None:
        self._slot = slot

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        if not self._slot:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model is loading")
        return await self._slot[0].Embed(request, context)

    async def Info(
        self, request: embedder_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.InfoResponse:
        if not self._slot:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model is loading")
        return await self._slot[0].Info(request, context)

    async def Rerank(
        self, request: embedder_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.RerankResponse:
        if not self._slot:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "model is loading")
        return await self._slot[0].Rerank(request, context)

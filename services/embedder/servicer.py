"""EmbedderService: protobuf in and out; validation and batching live elsewhere."""

from __future__ import annotations

import grpc

from cograph.common.v1 import common_pb2
from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from embedder.batcher import Batcher, BulkLaneFull, DeadlinePassed
from embedder.cross_encoder import CrossEncoderScorer
from embedder.limits import EmbedLimits
from svckit.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    ResourceExhausted,
)

# The stable reason a refused bulk request carries: the lane is full, not the service down.
BULK_LANE_FULL = "embedder_bulk_lane_full"


class EmbedderServicer(embedder_pb2_grpc.EmbedderServiceServicer):
    def __init__(
        self,
        batcher: Batcher,
        limits: EmbedLimits,
        model: str,
        dimension: int,
        backend: str,
        *,
        reranker: CrossEncoderScorer | None = None,
    ) -> None:
        self._batcher = batcher
        self._limits = limits
        self._model = model
        self._dimension = dimension
        self._backend = backend
        self._reranker = reranker

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        texts = list(request.texts)
        self._limits.check(texts)
        bulk = request.priority == embedder_pb2.EMBED_PRIORITY_BULK
        try:
            vectors = await self._batcher.embed(texts, context.time_remaining(), bulk=bulk)
        except DeadlinePassed:
            raise DeadlineExceeded("deadline passed before the batch ran") from None
        except BulkLaneFull as err:
            raise ResourceExhausted(str(err), reason=BULK_LANE_FULL) from None
        return embedder_pb2.EmbedResponse(
            vectors=[common_pb2.Vector(values=row.tolist()) for row in vectors],
            model=self._model,
            dimension=self._dimension,
        )

    async def Info(
        self, request: embedder_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.InfoResponse:
        return embedder_pb2.InfoResponse(
            model=self._model,
            dimension=self._dimension,
            backend=self._backend,
            max_batch_texts=self._limits.max_batch_texts,
            max_text_chars=self._limits.max_text_chars,
            reranker=self._reranker.name if self._reranker is not None else "",
            bulk_batch_texts=self._batcher.bulk_max_texts,
            bulk_queue_texts=self._batcher.bulk_queue_texts,
        )

    async def Rerank(
        self, request: embedder_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.RerankResponse:
        if self._reranker is None:
            raise FailedPrecondition("no cross-encoder is configured (EMBEDDER_RERANKER_PATH)")
        if not request.query.strip():
            raise InvalidArgument("query must not be blank")
        documents = list(request.documents)
        self._limits.check([request.query, *documents] if documents else [])
        scores = await self._reranker.score(request.query, documents)
        return embedder_pb2.RerankResponse(scores=scores, model=self._reranker.name)

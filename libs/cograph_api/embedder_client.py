"""The typed client every service uses to embed text."""

from __future__ import annotations

import grpc
import numpy as np
import numpy.typing as npt

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from svckit.errors import InvalidArgument

Vectors = npt.NDArray[np.float32]

# Codes that mean "the embedder cannot answer now", as opposed to "the request was wrong".
_UNAVAILABLE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}


class EmbedderUnavailable(Exception):
    """The embedder did not answer in time or is down."""


class EmbedderClient:
    def __init__(self, channel: grpc.aio.Channel, timeout_s: float = 2.0) -> None:
        self._stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        self._timeout_s = timeout_s

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        """One row per text; raises EmbedderUnavailable on deadline or outage."""
        try:
            response = await self._stub.Embed(
                embedder_pb2.EmbedRequest(texts=texts),
                timeout=self._timeout_s if timeout is None else timeout,
            )
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(err.details() or "invalid embed request") from err
            if err.code() in _UNAVAILABLE_CODES:
                raise EmbedderUnavailable(f"{err.code().name}: {err.details()}") from err
            raise
        if not response.vectors:
            return np.zeros((0, response.dimension), dtype=np.float32)
        return np.array([v.values for v in response.vectors], dtype=np.float32)

    async def embed_one(self, text: str, timeout: float | None = None) -> Vectors:
        vectors = await self.embed([text], timeout)
        return vectors[0]

    async def info(self) -> embedder_pb2.InfoResponse:
        try:
            return await self._stub.Info(embedder_pb2.InfoRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as err:
            raise EmbedderUnavailable(f"{err.code().name}: {err.details()}") from err

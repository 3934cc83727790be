"""Faults the outage tests cause on purpose: a port nothing listens on, a TCP proxy that can
be cut and restored, and an embedder that answers too late."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import grpc

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc

# Fast reconnects, so a test does not wait out gRPC's default backoff (up to 120 s) after
# an outage it caused itself.
FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 300),
]


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class TcpProxy:
    """Forwards 127.0.0.1:port to a target; `cut()` is an outage (listener closed and every
    live connection dropped), `restore()` listens on the same port again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers.difference_update((writer, up_writer))

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        self._server = None

    async def restore(self) -> None:
        await self.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self.cut()


class SlowEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """An embedder that answers far too late: the caller's deadline must cut it short."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0

    async def Embed(
        self, request: embedder_pb2.EmbedRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.EmbedResponse:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return embedder_pb2.EmbedResponse()

    async def Info(
        self, request: embedder_pb2.InfoRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.InfoResponse:
        return embedder_pb2.InfoResponse(model="slow", dimension=384)

    async def Rerank(
        self, request: embedder_pb2.RerankRequest, context: grpc.aio.ServicerContext
    ) -> embedder_pb2.RerankResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no reranker here")
        raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def slow_embedder(delay_s: float) -> AsyncIterator[tuple[str, SlowEmbedder]]:
    servicer = SlowEmbedder(delay_s)
    server = grpc.aio.server()
    embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(0)

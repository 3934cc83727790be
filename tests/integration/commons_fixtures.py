"""Helpers for the commons integration tests: a running service, a caller with a principal,
an embedder that can be cut off and restored, and one that is deliberately slow."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import grpc

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from commons.app import CommonsApp, start_commons
from commons.settings import CommonsSettings
from svckit.config import Env
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER
from tests.internal_auth import signed_channel, with_secret

# Fast reconnects, so a test does not wait out gRPC's default backoff (up to 120 s) after
# an outage it caused itself.
FAST_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 300),
]


def commons_settings(database_url: str, embedder_addr: str, **overrides: str) -> CommonsSettings:
    environ = {
        "COMMONS_LISTEN": "127.0.0.1:0",
        "COGRAPH_DATABASE_URL": database_url,
        "EMBEDDER_ADDR": embedder_addr,
        # Generous: two cores are shared by parallel test sessions.
        "EMBEDDER_TIMEOUT_S": "5",
        "COMMONS_BACKFILL_INTERVAL_S": "0.5",
        **overrides,
    }
    return CommonsSettings.from_env(Env(with_secret(environ)))


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class Caller:
    """A CommonsService stub that acts for a given principal (or none)."""

    stub: commons_pb2_grpc.CommonsServiceAsyncStub

    def _md(self, principal: str | None) -> tuple[tuple[str, str], ...]:
        if principal is None:
            return ()
        return ((PRINCIPAL_HEADER, principal), (ADMIN_HEADER, "0"))

    async def post(
        self, title: str, body: str, tags: list[str] | None = None, *, as_: str | None = "alice"
    ) -> commons_pb2.Post:
        response = await self.stub.CreatePost(
            commons_pb2.CreatePostRequest(title=title, body=body, tags=tags or []),
            metadata=self._md(as_),
            timeout=10,
        )
        return response.post

    async def get(self, post_id: str) -> commons_pb2.Post:
        response = await self.stub.GetPost(commons_pb2.GetPostRequest(post_id=post_id), timeout=10)
        return response.post

    async def delete(self, post_id: str, *, as_: str | None = "alice") -> None:
        await self.stub.DeletePost(
            commons_pb2.DeletePostRequest(post_id=post_id), metadata=self._md(as_), timeout=10
        )

    async def vote(
        self, post_id: str, direction: int, *, as_: str | None = "alice"
    ) -> commons_pb2.VotePostResponse:
        return await self.stub.VotePost(
            commons_pb2.VotePostRequest(post_id=post_id, direction=direction),  # type: ignore[arg-type]
            metadata=self._md(as_),
            timeout=30,
        )

    async def comment(
        self, post_id: str, body: str, *, as_: str | None = "alice"
    ) -> commons_pb2.CreateCommentResponse:
        return await self.stub.CreateComment(
            commons_pb2.CreateCommentRequest(post_id=post_id, body=body),
            metadata=self._md(as_),
            timeout=10,
        )

    async def comments(self, post_id: str) -> list[commons_pb2.Comment]:
        response = await self.stub.ListComments(
            commons_pb2.ListCommentsRequest(post_id=post_id), timeout=10
        )
        return list(response.comments)

    async def search(
        self, query: str, *, as_: str | None = "alice", timeout: float = 30
    ) -> commons_pb2.SearchPostsResponse:
        return await self.stub.SearchPosts(
            commons_pb2.SearchPostsRequest(query=query), metadata=self._md(as_), timeout=timeout
        )

    async def wait_searchable(self, post_id: str, timeout_s: float = 30.0) -> None:
        await wait_for(lambda: self._searchable(post_id), timeout_s, f"{post_id} searchable")

    async def _searchable(self, post_id: str) -> bool:
        return (await self.get(post_id)).searchable


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


@dataclass
class Running:
    app: CommonsApp
    caller: Caller
    database_url: str

    async def sql(self, query: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.database_url)
        try:
            rows: list[asyncpg.Record] = await conn.fetch(query, *args)
            return rows
        finally:
            await conn.close()


@contextlib.asynccontextmanager
async def running_commons(
    settings: CommonsSettings, embedder_channel: grpc.aio.Channel | None = None
) -> AsyncIterator[Running]:
    app = await start_commons(settings, embedder_channel=embedder_channel)
    channel = signed_channel(f"127.0.0.1:{app.port}")
    try:
        caller = Caller(commons_pb2_grpc.CommonsServiceStub(channel))
        yield Running(app, caller, settings.database_url)
    finally:
        await channel.close(None)
        await app.stop()


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


def reason_of(err: grpc.aio.AioRpcError) -> str | None:
    # grpc-stubs types metadata items loosely; at run time each is a (key, value) pair.
    pairs: list[tuple[str, str | bytes]] = list(err.trailing_metadata() or ())  # type: ignore[arg-type]
    for key, value in pairs:
        if key == "x-cograph-reason":
            return value if isinstance(value, str) else value.decode()
    return None

"""The commons service as its tests use it: settings, a running service, and a caller that
acts for a given principal."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import grpc

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from commons.app import CommonsApp, start_commons
from commons.settings import CommonsSettings
from svckit.config import Env
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER
from tests.internal_auth import signed_channel, with_secret


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


@dataclass
class Caller:
    """A CommonsService stub that acts for a given principal (or none)."""

    stub: commons_pb2_grpc.CommonsServiceAsyncStub

    def _md(self, principal: str | None) -> tuple[tuple[str, str], ...]:
        return self.md(principal)

    @staticmethod
    def md(principal: str | None, *, admin: bool = False) -> tuple[tuple[str, str], ...]:
        """The metadata of a call acting for `principal` (None: anonymous)."""
        if principal is None:
            return ()
        return ((PRINCIPAL_HEADER, principal), (ADMIN_HEADER, "1" if admin else "0"))

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

    async def list_posts(
        self,
        *,
        sort: int = 0,
        tag: str = "",
        cursor: str = "",
        limit: int = 0,
        as_: str | None = "alice",
        admin: bool = False,
    ) -> commons_pb2.ListPostsResponse:
        return await self.stub.ListPosts(
            commons_pb2.ListPostsRequest(sort=sort, tag=tag, cursor=cursor, limit=limit),  # type: ignore[arg-type]
            metadata=self.md(as_, admin=admin),
            timeout=10,
        )

    async def profile(self, *, as_: str | None = "alice") -> commons_pb2.Profile:
        response = await self.stub.GetProfile(
            commons_pb2.GetProfileRequest(), metadata=self._md(as_), timeout=10
        )
        return response.profile

    async def set_name(self, name: str, *, as_: str | None = "alice") -> commons_pb2.Profile:
        response = await self.stub.SetDisplayName(
            commons_pb2.SetDisplayNameRequest(display_name=name), metadata=self._md(as_), timeout=10
        )
        return response.profile

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

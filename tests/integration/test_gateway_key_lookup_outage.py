"""The gateway's key lookup meets a failing database: every answer is 503 with a JSON body,
never a 500 (nor a 401: whether the key is valid is unknown), and requests succeed again by
themselves once the database is back.

Two failures, both real: a connection still busy with an abandoned statement (asyncpg
answers "another operation is in progress"), and PostgreSQL killed outright while keyed
requests are in flight. The server is a dedicated embedded one, so that killing it stops
no other test.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil
import pytest

from svckit.embedded import EmbeddedPostgres
from tests.integration.support.stacks import gateway_stack, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def own_server() -> Iterator[EmbeddedPostgres]:
    root = Path(tempfile.mkdtemp(prefix="cograph-pg-keys-"))
    server = EmbeddedPostgres(root / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


class _BusyConnection:
    """A pool that hands out one real connection while a statement runs on it: what the
    pool's connection is after a lookup abandoned at its deadline, before asyncpg has heard
    back about the cancel. The first `healthy` acquisitions go to the real pool."""

    def __init__(self, conn: asyncpg.Connection, pool: asyncpg.Pool, healthy: int = 0) -> None:
        self._conn = conn
        self._pool = pool
        self._healthy = healthy

    def acquire(self) -> Any:
        if self._healthy > 0:
            self._healthy -= 1
            return self._pool.acquire()
        return self

    async def __aenter__(self) -> asyncpg.Connection:
        return self._conn

    async def __aexit__(self, *_: object) -> None:
        return None


@contextlib.asynccontextmanager
async def _busy(url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(url)
    sleeping = asyncio.create_task(conn.execute("SELECT pg_sleep(30)"))
    await asyncio.sleep(0.2)  # the statement is on the wire
    try:
        yield conn
    finally:
        sleeping.cancel()
        with contextlib.suppress(BaseException):
            await sleeping
        conn.terminate()


def _assert_unavailable(reply: httpx.Response) -> None:
    where = f"{reply.request.method} {reply.request.url.path}"
    assert reply.status_code == 503, f"{where}: {reply.status_code} {reply.text}"
    body = reply.json()
    assert body["error"] == "unavailable" and "key store" in body["detail"], body


async def test_a_busy_connection_is_503_not_500(
    own_server: EmbeddedPostgres,
    embedder_address: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    url = own_server.start()
    async with (
        gateway_stack(
            url, embedder_address, tmp_path_factory.mktemp("gw-busy"), services=()
        ) as stack,
        stack.client(stack.admin_key) as admin,
    ):
        assert (await admin.get("/api/keys")).status_code == 200
        keys = stack.gateway.keys
        pool = keys._pool
        async with _busy(stack.database_url) as conn:
            # The store's pool, swapped for one whose connection is busy (no other way to
            # make asyncpg hand a busy connection to exactly this lookup).
            keys._pool = _BusyConnection(conn, pool)
            try:
                for path in ("/api/keys", "/api/repositories"):
                    _assert_unavailable(await admin.get(path))
                # The lookup passes, then the key listing meets the busy connection.
                keys._pool = _BusyConnection(conn, pool, healthy=1)
                listed = await admin.get("/api/keys")
                assert listed.status_code == 503, listed.text
                assert listed.json()["error"] == "database_unavailable", listed.json()
            finally:
                keys._pool = pool
        assert (await admin.get("/api/keys")).status_code == 200


async def test_postgres_killed_under_keyed_requests_is_503_then_recovers(
    own_server: EmbeddedPostgres,
    embedder_address: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    url = own_server.start()
    async with (
        gateway_stack(
            url, embedder_address, tmp_path_factory.mktemp("gw-kill"), services=()
        ) as stack,
        stack.client(stack.admin_key) as admin,
    ):
        assert (await admin.get("/api/keys")).status_code == 200
        statuses: list[int] = []
        stop = asyncio.Event()

        async def keep_asking() -> None:
            while not stop.is_set():
                reply = await admin.get("/api/keys")
                statuses.append(reply.status_code)
                if reply.status_code == 503:
                    # The lookup's own 503, or the listing's after a lookup that passed
                    # (asyncpg's "another operation (N) is in progress" was a 500 here).
                    error = reply.json()["error"]
                    assert error in ("unavailable", "database_unavailable"), reply.json()

        askers = [asyncio.create_task(keep_asking()) for _ in range(8)]
        await asyncio.sleep(0.5)
        pid = own_server.pid()
        assert pid is not None
        # The whole server at once, mid-request: what the resilience run did.
        postmaster = psutil.Process(pid)
        for process in [postmaster, *postmaster.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        await asyncio.sleep(2.0)
        stop.set()
        await asyncio.gather(*askers)
        assert set(statuses) <= {200, 503}, sorted(set(statuses))
        assert 503 in statuses and 200 in statuses

        # Down: every keyed request is 503, at once (no pooled connection survives).
        for path in ("/api/keys", "/api/repositories"):
            _assert_unavailable(await admin.get(path))

        await asyncio.get_running_loop().run_in_executor(None, own_server.restart)

        async def answers() -> bool:
            return (await admin.get("/api/keys")).status_code == 200

        await wait_until(answers, 30, "the key lookup to answer after PostgreSQL came back")

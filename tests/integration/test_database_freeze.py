"""A frozen PostgreSQL seen through the gateway: every request is refused with 503/504 and
a JSON body within a bound, none hangs; once the server runs again, everything answers
again without anything being restarted.

The server is a dedicated embedded one, so that freezing it stops no other test. Frozen
means every process of the server stopped (SIGSTOP): the postmaster alone would only stop
new connections, while the pools' open connections are served by their own backends.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from svckit.embedded import EmbeddedPostgres
from tests.integration.support.stacks import gateway_stack, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The promise: well under 15 s. Statements give up after 8 s (+1 s client margin, +1 s for
# the cancellation to be confirmed before the connection is dropped), key
# lookups after 2.5 s; the rest is slack for a loaded CI machine.
BOUND_S = 13.0


@pytest.fixture(scope="module")
def own_server() -> Iterator[EmbeddedPostgres]:
    # Outside pytest's numbered temporary directories: a concurrent pytest run prunes old
    # ones, and a data directory removed under a running server crashes it.
    root = Path(tempfile.mkdtemp(prefix="cograph-pg-freeze-"))
    server = EmbeddedPostgres(root / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _freeze(server: EmbeddedPostgres) -> list[psutil.Process]:
    pid = server.pid()
    assert pid is not None
    postmaster = psutil.Process(pid)
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes:
        process.send_signal(signal.SIGSTOP)
    return processes


def _thaw(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGCONT)


async def _timed(call: Awaitable[httpx.Response]) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    reply = await call
    return reply, time.monotonic() - start


async def test_frozen_database_is_503_within_bounds_and_recovers_alone(
    own_server: EmbeddedPostgres,
    embedder_address: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    url = own_server.start()  # the running server's URL (start reuses it)
    data = tmp_path_factory.mktemp("gw-freeze")
    async with (
        gateway_stack(
            url,
            embedder_address,
            data,
            services=("commons", "retrieval"),
            GATEWAY_ALLOW_ANONYMOUS="true",
        ) as stack,
        stack.client(await stack.key("alice")) as alice,
        stack.client() as anon,
    ):
        posted = await alice.post("/v1/posts", json={"title": "frozen", "body": "before"})
        assert posted.status_code == 201, posted.text
        post = f"/v1/posts/{posted.json()['id']}"
        search = {"query": "parse config"}
        assert (await anon.post("/api/search", json=search)).status_code == 200
        assert (await alice.get(post)).status_code == 200
        pids_before = own_server.pid()

        frozen = _freeze(own_server)
        try:
            replies = await asyncio.gather(
                # With a key: the gateway's own lookup has to give up (2.5 s).
                _timed(alice.get(post)),
                _timed(alice.post("/api/search", json=search)),
                _timed(alice.get("/api/keys")),
                # Without one (anonymous reads): the services' own database deadlines.
                _timed(anon.post("/api/search", json=search)),
                _timed(anon.get(post)),
                _timed(anon.get("/api/repositories")),
                _timed(anon.get("/readyz")),
            )
        finally:
            _thaw(frozen)
        for reply, seconds in replies:
            where = f"{reply.request.method} {reply.request.url.path}"
            assert reply.status_code in (503, 504), f"{where}: {reply.status_code} {reply.text}"
            body = reply.json()
            assert body["error"] and body["detail"], f"{where}: {body}"
            assert seconds < BOUND_S, f"{where} took {seconds:.1f} s"
        keyed, backend, ready = replies[0][0].json(), replies[3][0].json(), replies[6][0].json()
        assert keyed["error"] == "unavailable" and "key store" in keyed["detail"]
        assert backend["error"] == "database_unavailable", backend
        assert ready["status"] == "not_ready" and ready["dependencies"]["database"] != "serving"

        # Thawed: the same processes answer again by themselves.
        async def answers() -> bool:
            checks = await asyncio.gather(
                alice.get(post),
                alice.post("/api/search", json=search),
                anon.get("/api/repositories"),
                anon.get("/readyz"),
            )
            return all(reply.status_code == 200 for reply in checks)

        await wait_until(answers, 20, "requests to succeed after the database thawed")
        assert own_server.pid() == pids_before

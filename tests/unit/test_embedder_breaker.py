"""The query-embedding circuit breaker: consecutive failures open it, calls then fail at once
for the cool-down, one probe goes through after it, its outcome closes or reopens it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from cograph_api.embedder_client import (
    CircuitBreaker,
    EmbedderBusy,
    EmbedderClient,
    EmbedderUnavailable,
)
from svckit.config import Env, embedder_breaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """Stands in for the gRPC call behind EmbedderClient.embed."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def __call__(self, texts: list[str], timeout: float | None) -> np.ndarray:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise EmbedderUnavailable("DEADLINE_EXCEEDED: no answer")
        return np.ones((len(texts), 4), dtype=np.float32)


def _client(breaker: CircuitBreaker, backend: Backend) -> EmbedderClient:
    client = EmbedderClient.__new__(EmbedderClient)
    client._timeout_s = 2.0
    client._breaker = None
    client._embed = backend  # type: ignore[method-assign]
    return client.with_breaker(breaker)


def test_breaker_opens_fails_fast_probes_and_closes() -> None:
    async def scenario() -> None:
        clock, backend = Clock(), Backend()
        breaker = CircuitBreaker(3, 5.0, clock=clock)
        client = _client(breaker, backend)
        for _ in range(3):
            with pytest.raises(EmbedderUnavailable, match="DEADLINE_EXCEEDED"):
                await client.embed(["q"])
        assert breaker.state == "open" and backend.calls == 3
        # Open: no call reaches the embedder.
        for _ in range(10):
            with pytest.raises(EmbedderUnavailable, match="circuit open"):
                await client.embed(["q"])
        assert backend.calls == 3
        # After the cool-down one probe goes; it fails: open for another cool-down.
        clock.now += 5.0
        assert breaker.state == "half_open"
        with pytest.raises(EmbedderUnavailable, match="DEADLINE_EXCEEDED"):
            await client.embed(["q"])
        assert backend.calls == 4 and breaker.state == "open"
        with pytest.raises(EmbedderUnavailable, match="circuit open"):
            await client.embed(["q"])
        # The embedder is back: the next probe closes the breaker.
        backend.down = False
        clock.now += 5.0
        assert (await client.embed(["q"])).shape == (1, 4)
        assert breaker.state == "closed"
        assert (await client.embed(["q"])).shape == (1, 4)
        assert backend.calls == 6

    asyncio.run(scenario())


def test_only_one_probe_at_a_time_and_a_cancelled_probe_frees_its_place() -> None:
    async def scenario() -> None:
        clock, backend = Clock(), Backend()
        breaker = CircuitBreaker(1, 1.0, clock=clock)
        client = _client(breaker, backend)
        with pytest.raises(EmbedderUnavailable):
            await client.embed(["q"])
        clock.now += 1.0
        backend.gate = asyncio.Event()
        probe = asyncio.create_task(client.embed(["q"]))
        await asyncio.sleep(0)
        with pytest.raises(EmbedderUnavailable, match="circuit open"):
            await client.embed(["q"])  # the probe is out: others still fail fast
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        backend.gate, backend.down = None, False
        assert (await client.embed(["q"])).shape == (1, 4)  # a new probe may go
        assert breaker.state == "closed"

    asyncio.run(scenario())


def test_a_success_resets_the_count_and_the_plain_client_has_no_breaker() -> None:
    async def scenario() -> None:
        backend = Backend()
        breaker = CircuitBreaker(2, 5.0, clock=Clock())
        client = _client(breaker, backend)
        with pytest.raises(EmbedderUnavailable):
            await client.embed(["q"])
        backend.down = False
        await client.embed(["q"])
        backend.down = True
        with pytest.raises(EmbedderUnavailable):
            await client.embed(["q"])
        assert breaker.state == "closed"  # one failure since the success, not two

    asyncio.run(scenario())


def test_breaker_settings() -> None:
    default = embedder_breaker(Env({}))
    assert (default.failures, default.cooldown_s) == (3, 5.0)
    custom = embedder_breaker(
        Env({"EMBEDDER_BREAKER_FAILURES": "5", "EMBEDDER_BREAKER_COOLDOWN_S": "0.5"})
    )
    assert (custom.failures, custom.cooldown_s) == (5, 0.5)


def test_a_full_bulk_lane_neither_opens_nor_closes_the_breaker() -> None:
    """EmbedderBusy means the embedder answered (its bulk lane is full): not an outage."""

    async def scenario() -> None:
        clock = Clock()
        breaker = CircuitBreaker(2, 5.0, clock=clock)

        async def busy(texts: list[str], timeout: float | None) -> np.ndarray:
            raise EmbedderBusy("RESOURCE_EXHAUSTED: the bulk lane holds 256 texts")

        client = _client(breaker, Backend())
        client._embed = busy  # type: ignore[method-assign]
        for _ in range(5):
            with pytest.raises(EmbedderBusy):
                await client.embed(["q"])
        assert breaker.state == "closed"
        breaker.failed()
        clock.now += 10  # cool-down over: the next call is the probe
        breaker.failed()  # two failures in a row: open
        clock.now += 10
        with pytest.raises(EmbedderBusy):
            await client.embed(["q"])  # the probe found it busy: decides nothing
        assert breaker.state == "half_open"

    asyncio.run(scenario())

"""Indexing waits for an embedder that is loading or briefly down, says so, and fails with a
clear message when it gives up; a job reports the cause of a pipeline failure, not the task
group that carried it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from cograph_api.embedder_client import EmbedderBusy, EmbedderUnavailable, Vectors
from retrieval.indexing.jobs import failure_message
from retrieval.indexing.pipeline import EmbedPipeline, Emit, WorkUnit


class DownFor:
    """Raises EmbedderUnavailable until `seconds` have passed since the first call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.first: float | None = None
        self.calls = 0

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        self.calls += 1
        now = time.monotonic()
        self.first = self.first or now
        if now - self.first < self.seconds:
            raise EmbedderUnavailable("UNAVAILABLE: connection refused")
        return np.ones((len(texts), 4), dtype=np.float32)


async def _run(pipeline: EmbedPipeline, units: int = 3) -> list[str]:
    written: list[str] = []

    async def produce(emit: Emit) -> None:
        for n in range(units):
            await emit(WorkUnit(f"u{n}", [f"text {n}", f"more {n}"], None))

    async def write(group: Sequence[WorkUnit]) -> None:
        written.extend(unit.key for unit in group)

    await pipeline.run(produce, write)
    return written


def test_indexing_waits_for_the_embedder_and_says_so() -> None:
    states: list[bool] = []
    embedder = DownFor(0.3)  # two backoff sleeps (0.25 s, then 0.5 s) per batch
    pipeline = EmbedPipeline(embedder, batch_size=2, wait_s=10, on_waiting=states.append)
    written = asyncio.run(_run(pipeline))
    assert sorted(written) == ["u0", "u1", "u2"]
    assert states == [True, False]  # one wait, however many batches waited in it
    assert embedder.calls > 3


def test_indexing_gives_up_with_a_clear_error() -> None:
    pipeline = EmbedPipeline(DownFor(60), batch_size=2, wait_s=0.5)
    began = time.monotonic()
    with pytest.raises(ExceptionGroup) as caught:
        asyncio.run(_run(pipeline))
    assert time.monotonic() - began < 5
    assert failure_message(caught.value) == (
        "the embedder did not answer for 0.5 s (RETRIEVAL_EMBEDDER_WAIT_S): "
        "UNAVAILABLE: connection refused"
    )


def test_failure_message_unwraps_nested_groups() -> None:
    inner = BaseExceptionGroup("inner", [asyncio.CancelledError(), ValueError("bad source")])
    assert failure_message(BaseExceptionGroup("outer", [inner])) == "bad source"
    assert failure_message(RuntimeError()) == "RuntimeError"


class BusyFor:
    """Refuses with EmbedderBusy (bulk lane full) for `seconds` since the first call; counts
    the calls in flight at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.first: float | None = None
        self.refused = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        now = time.monotonic()
        self.first = self.first or now
        if now - self.first < self.seconds:
            self.refused += 1
            raise EmbedderBusy("RESOURCE_EXHAUSTED: the bulk lane holds 256 texts")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1
        return np.ones((len(texts), 4), dtype=np.float32)


def test_a_full_bulk_lane_makes_indexing_wait_without_saying_the_embedder_is_down() -> None:
    states: list[bool] = []
    embedder = BusyFor(0.5)
    pipeline = EmbedPipeline(
        embedder, batch_size=2, concurrency=2, wait_s=0.1, on_waiting=states.append
    )
    written = asyncio.run(_run(pipeline, units=4))
    assert sorted(written) == ["u0", "u1", "u2", "u3"]
    assert states == []  # busy is not down; and wait_s (0.1 s) did not apply to it
    # Backed off: a handful of retries per batch in 0.5 s, not a spin.
    assert 2 <= embedder.refused <= 12
    assert embedder.most_in_flight <= 2  # never more than `concurrency` requests out


def test_indexing_gives_up_when_the_bulk_lane_stays_full() -> None:
    pipeline = EmbedPipeline(BusyFor(60), batch_size=2, capacity_wait_s=0.4)
    began = time.monotonic()
    with pytest.raises(ExceptionGroup) as caught:
        asyncio.run(_run(pipeline))
    assert 0.4 <= time.monotonic() - began < 5
    assert failure_message(caught.value) == (
        "no room in the embedder's bulk lane for 0.4 s: "
        "RESOURCE_EXHAUSTED: the bulk lane holds 256 texts"
    )

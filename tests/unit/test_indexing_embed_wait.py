"""Indexing waits for an embedder that is loading or briefly down, says so, and fails with a
clear message when it gives up; a job reports the cause of a pipeline failure, not the task
group that carried it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

from cograph_api.embedder_client import EmbedderUnavailable, Vectors
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

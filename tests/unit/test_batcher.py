"""embedder.batcher: coalescing, ordering, deadlines and failures (pure logic)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from embedder.batcher import Batcher, DeadlinePassed, Vectors

pytestmark = pytest.mark.asyncio(loop_scope="function")


class RecordingEncoder:
    """Encodes text i as a one-hot-ish vector of its length; records batch sizes."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.delay_s = delay_s
        self.fail = fail
        self.started = threading.Event()

    def __call__(self, texts: list[str]) -> Vectors:
        self.started.set()
        self.batches.append(list(texts))
        if self.delay_s:
            threading.Event().wait(self.delay_s)
        if self.fail:
            raise RuntimeError("model exploded")
        return np.array([[len(t), 0.0] for t in texts], dtype=np.float32)


async def test_results_go_back_to_their_callers_in_order() -> None:
    encoder = RecordingEncoder()
    batcher = Batcher(encoder, max_texts=64, max_wait_s=0.01)
    batcher.start()
    try:
        results = await asyncio.gather(
            *(batcher.embed(["x" * i, "y" * (i + 100)]) for i in range(10))
        )
    finally:
        await batcher.close()
    for i, vectors in enumerate(results):
        assert vectors[:, 0].tolist() == [i, i + 100]


async def test_concurrent_requests_are_coalesced() -> None:
    encoder = RecordingEncoder(delay_s=0.05)
    batcher = Batcher(encoder, max_texts=16, max_wait_s=0.0)
    batcher.start()
    try:
        await asyncio.gather(*(batcher.embed([f"t{i}"]) for i in range(33)))
    finally:
        await batcher.close()
    sizes = [len(b) for b in encoder.batches]
    assert sum(sizes) == 33
    assert max(sizes) == 16  # filled up while the previous batch ran
    assert len(sizes) <= 5


async def test_batch_never_exceeds_max_texts_unless_one_request_does() -> None:
    encoder = RecordingEncoder(delay_s=0.02)
    batcher = Batcher(encoder, max_texts=4, max_wait_s=0.0)
    batcher.start()
    try:
        await asyncio.gather(
            batcher.embed(["a"] * 3), batcher.embed(["b"] * 3), batcher.embed(["c"] * 9)
        )
    finally:
        await batcher.close()
    assert sorted(len(b) for b in encoder.batches) == [3, 3, 9]


async def test_expired_requests_are_not_encoded() -> None:
    encoder = RecordingEncoder(delay_s=0.2)
    batcher = Batcher(encoder, max_texts=1, max_wait_s=0.0)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.embed(["slow"]))
        await asyncio.get_running_loop().run_in_executor(None, encoder.started.wait)
        with pytest.raises(DeadlinePassed):
            await batcher.embed(["late"], timeout_s=0.05)
        await first
    finally:
        await batcher.close()
    assert ["late"] not in encoder.batches
    assert batcher.stats.expired == 1


async def test_cancelled_callers_are_skipped() -> None:
    encoder = RecordingEncoder(delay_s=0.1)
    batcher = Batcher(encoder, max_texts=1, max_wait_s=0.0)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.embed(["first"]))
        await asyncio.get_running_loop().run_in_executor(None, encoder.started.wait)
        gone = asyncio.create_task(batcher.embed(["gone"]))
        await asyncio.sleep(0.01)
        gone.cancel()
        await first
        await batcher.embed(["after"])
    finally:
        await batcher.close()
    assert ["gone"] not in encoder.batches


async def test_model_failure_reaches_every_caller_and_the_worker_survives() -> None:
    encoder = RecordingEncoder(fail=True)
    batcher = Batcher(encoder, max_texts=8, max_wait_s=0.0)
    batcher.start()
    try:
        with pytest.raises(RuntimeError, match="model exploded"):
            await batcher.embed(["a"])
        encoder.fail = False
        vectors = await batcher.embed(["abc"])
        assert vectors[0, 0] == 3
    finally:
        await batcher.close()

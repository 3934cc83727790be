"""embedder.batcher: coalescing, ordering, deadlines and failures (pure logic)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import numpy as np
import pytest

from embedder.batcher import BULK_NICE, Batcher, BulkLaneFull, DeadlinePassed, Vectors

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


# ---- the bulk lane (issue 28: indexing must not starve queries) ----


async def test_bulk_requests_run_in_slices_of_at_most_bulk_max_texts() -> None:
    query, bulk = RecordingEncoder(), RecordingEncoder()
    batcher = Batcher(query, max_texts=64, max_wait_s=0.0, bulk_encode=bulk, bulk_max_texts=3)
    batcher.start()
    try:
        texts = ["x" * i for i in range(1, 8)]
        first, second = await asyncio.gather(
            batcher.embed(texts, bulk=True), batcher.embed(["yy", "yyy"], bulk=True)
        )
    finally:
        await batcher.close()
    assert first[:, 0].tolist() == list(range(1, 8))  # reassembled, in order
    assert second[:, 0].tolist() == [2, 3]
    assert [len(b) for b in bulk.batches] == [3, 3, 3]  # the last slice spans both requests
    assert query.batches == []
    assert batcher.bulk_stats.queued_texts == 0


async def test_a_query_is_answered_while_a_bulk_slice_runs() -> None:
    query = RecordingEncoder()
    bulk = RecordingEncoder(delay_s=0.5)
    batcher = Batcher(query, max_texts=64, max_wait_s=0.0, bulk_encode=bulk, bulk_max_texts=4)
    batcher.start()
    try:
        indexing = asyncio.create_task(batcher.embed(["chunk"] * 12, bulk=True))
        await asyncio.get_running_loop().run_in_executor(None, bulk.started.wait)
        started = time.monotonic()
        vectors = await batcher.embed(["where is billing"], timeout_s=0.2)
        waited = time.monotonic() - started
        assert not indexing.done()
        await indexing
    finally:
        await batcher.close()
    assert vectors[0, 0] == len("where is billing")
    assert waited < 0.2  # a bulk slice takes 0.5 s: the query did not wait for it


async def test_a_full_bulk_lane_refuses_and_frees_room_as_it_drains() -> None:
    bulk = RecordingEncoder(delay_s=0.1)
    batcher = Batcher(
        RecordingEncoder(),
        max_texts=64,
        max_wait_s=0.0,
        bulk_encode=bulk,
        bulk_max_texts=2,
        bulk_queue_texts=6,
    )
    batcher.start()
    try:
        held = asyncio.create_task(batcher.embed(["a"] * 6, bulk=True))
        await asyncio.sleep(0)
        assert batcher.bulk_stats.queued_texts == 6  # at the edge: accepted
        with pytest.raises(BulkLaneFull, match="EMBEDDER_BULK_QUEUE_TEXTS 6"):
            await batcher.embed(["b"], bulk=True)
        assert batcher.bulk_stats.rejected == 1
        await asyncio.get_running_loop().run_in_executor(None, bulk.started.wait)
        await asyncio.sleep(0.15)  # one slice (2 texts) done: room for 2 more
        await asyncio.gather(held, batcher.embed(["c", "c"], bulk=True))
    finally:
        await batcher.close()
    assert batcher.bulk_stats.queued_texts == 0


async def test_an_empty_bulk_lane_takes_a_request_bigger_than_it() -> None:
    batcher = Batcher(
        RecordingEncoder(),
        max_texts=64,
        max_wait_s=0.0,
        bulk_encode=RecordingEncoder(),
        bulk_max_texts=4,
        bulk_queue_texts=2,
    )
    batcher.start()
    try:
        vectors = await batcher.embed(["z"] * 9, bulk=True)
    finally:
        await batcher.close()
    assert vectors.shape == (9, 2)


async def test_expired_and_cancelled_bulk_requests_give_their_room_back() -> None:
    bulk = RecordingEncoder(delay_s=0.2)
    batcher = Batcher(
        RecordingEncoder(),
        max_texts=64,
        max_wait_s=0.0,
        bulk_encode=bulk,
        bulk_max_texts=1,
        bulk_queue_texts=100,
    )
    batcher.start()
    try:
        first = asyncio.create_task(batcher.embed(["slow"], bulk=True))
        await asyncio.get_running_loop().run_in_executor(None, bulk.started.wait)
        gone = asyncio.create_task(batcher.embed(["gone"] * 10, bulk=True))
        await asyncio.sleep(0)
        assert batcher.bulk_stats.queued_texts == 10
        gone.cancel()
        await asyncio.sleep(0)
        assert batcher.bulk_stats.queued_texts == 0
        with pytest.raises(DeadlinePassed):
            await batcher.embed(["late"] * 5, timeout_s=0.05, bulk=True)
        await first
        await asyncio.sleep(0.01)
        assert batcher.bulk_stats.queued_texts == 0
    finally:
        await batcher.close()
    assert all("gone" not in b and "late" not in b for b in bulk.batches)
    assert batcher.bulk_stats.expired == 1


async def test_a_failed_bulk_slice_fails_its_requests_and_the_lane_survives() -> None:
    bulk = RecordingEncoder(fail=True)
    batcher = Batcher(
        RecordingEncoder(), max_texts=64, max_wait_s=0.0, bulk_encode=bulk, bulk_max_texts=2
    )
    batcher.start()
    try:
        with pytest.raises(RuntimeError, match="model exploded"):
            await batcher.embed(["a"] * 5, bulk=True)
        bulk.fail = False
        vectors = await batcher.embed(["abc"], bulk=True)
    finally:
        await batcher.close()
    assert vectors[0, 0] == 3
    assert batcher.bulk_stats.queued_texts == 0


@pytest.mark.skipif(sys.platform != "linux", reason="nice is per thread on Linux only")
async def test_the_bulk_lane_runs_at_a_lower_cpu_priority_than_queries() -> None:
    def niceness(texts: list[str]) -> Vectors:
        nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return np.full((len(texts), 2), nice, dtype=np.float32)

    batcher = Batcher(niceness, max_texts=8, max_wait_s=0.0, bulk_encode=niceness)
    batcher.start()
    try:
        query = await batcher.embed(["q"])
        bulk = await batcher.embed(["b"], bulk=True)
    finally:
        await batcher.close()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert query[0, 0] == base
    assert bulk[0, 0] == min(19, max(base, BULK_NICE))

"""Queries first (issue 28): the real embedder on 127.0.0.1:0 answers query embeddings
within their deadline while a stream of large indexing batches runs through its bulk
lane, and refuses bulk work beyond the lane's capacity instead of queuing it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np
import pytest
import pytest_asyncio

from cograph_api.embedder_client import EmbedderBusy, EmbedderClient
from embedder.app import EmbedderApp, start_embedder
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.stacks import wait_until
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The deadline retrieval and the commons give a query embedding (EMBEDDER_TIMEOUT_S's and
# RETRIEVAL_EMBEDDER_TIMEOUT_S's default).
QUERY_DEADLINE_S = 2.0


def _chunk(i: int) -> str:
    """A 2,000-character code chunk (the indexer's cut), different for every i: the model
    runs its full 256 tokens on each."""
    line = f"def handler_{i}(request, retries={i % 7}):\n    return parse_config(request.body)\n"
    return (line * 40)[:2000]


def _changed(value: Callable[[], int], before: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return value() != before

    return check


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def small_lane() -> AsyncIterator[EmbedderApp]:
    app = await start_embedder(
        embedder_settings(EMBEDDER_BULK_QUEUE_TEXTS="16", EMBEDDER_BULK_BATCH_TEXTS="4")
    )
    try:
        yield app
    finally:
        await app.stop()


async def test_queries_are_answered_in_time_while_indexing_batches_stream(
    embedder_app: EmbedderApp, embedder_address: str
) -> None:
    batcher = embedder_app.batcher
    async with signed_channel(embedder_address) as channel:
        client = EmbedderClient(channel, timeout_s=QUERY_DEADLINE_S)
        indexer = EmbedderClient(channel, timeout_s=300.0).for_bulk()
        # The shared embedder may still be running a large query batch an earlier test
        # gave up on: the reference vector waits for it, the measured queries come after.
        settled = EmbedderClient(channel, timeout_s=60.0)
        expected = await settled.embed(["where is the billing retry configured"])
        stop = asyncio.Event()
        chunks_done = 0

        async def index_stream(offset: int) -> None:
            # As the pipeline sends them: 64 chunks a request, three requests in flight.
            nonlocal chunks_done
            n = offset
            while not stop.is_set():
                texts = [_chunk(n + k) for k in range(64)]
                vectors = await indexer.embed(texts)
                assert vectors.shape == (64, 384)
                chunks_done += 64
                n += 3 * 64

        before = batcher.bulk_stats.batches
        streams = [asyncio.create_task(index_stream(k * 64)) for k in range(3)]
        try:
            # Let the bulk lane fill: three requests of 64 chunks are ~10 s of model work.
            await wait_until(_changed(lambda: batcher.bulk_stats.batches, before), 60, "a slice")
            latencies = []
            for _ in range(20):
                began = time.perf_counter()
                (vector,) = await client.embed(["where is the billing retry configured"])
                latencies.append(time.perf_counter() - began)
                assert float(vector @ expected[0]) > 0.999
                await asyncio.sleep(0.05)
            queued_at_end = batcher.bulk_stats.queued_texts
        finally:
            stop.set()
            await asyncio.gather(*streams)
    # Every query answered (EmbedderUnavailable would have raised above), and well within
    # its deadline: none waited for the queued indexing work still in the lane at the end.
    assert max(latencies) < QUERY_DEADLINE_S / 2, latencies
    assert queued_at_end > 0  # indexing was really still queued when the last query ran
    assert batcher.bulk_stats.batches > before
    assert chunks_done >= 64 * 3
    assert batcher.bulk_max_texts == 8  # EMBEDDER_BULK_BATCH_TEXTS' default


async def test_bulk_requests_beyond_the_lane_are_refused_as_busy(small_lane: EmbedderApp) -> None:
    async with signed_channel(f"127.0.0.1:{small_lane.port}") as channel:
        bulk = EmbedderClient(channel, timeout_s=60.0).for_bulk()
        info = await bulk.info()
        assert (info.bulk_batch_texts, info.bulk_queue_texts) == (4, 16)
        first = asyncio.create_task(bulk.embed([_chunk(i) for i in range(16)]))
        lane = small_lane.batcher.bulk_stats
        await wait_until(_changed(lambda: lane.queued_texts, 0), 30, "texts queued", 0.005)
        with pytest.raises(EmbedderBusy, match="EMBEDDER_BULK_QUEUE_TEXTS 16"):
            await bulk.embed([_chunk(99)] * 8)
        # Queries are not bulk work: the full lane does not refuse them.
        query = await EmbedderClient(channel, timeout_s=QUERY_DEADLINE_S).embed(["billing"])
        vectors = await first
        # Room again once the lane drained; the vectors match the query lane's.
        (again,) = await bulk.embed([_chunk(3)])
        (same,) = await EmbedderClient(channel, timeout_s=10.0).embed([_chunk(3)])
    assert query.shape == (1, 384)
    assert vectors.shape == (16, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(again @ same) > 0.999
    assert small_lane.batcher.bulk_stats.rejected == 1

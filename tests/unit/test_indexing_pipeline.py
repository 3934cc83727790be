"""The prepare -> embed -> write pipeline with a fake, slow embedder."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from cograph_api.embedder_client import EmbedderUnavailable
from retrieval.indexing.pipeline import EmbedPipeline, Emit, Vectors, WorkUnit

pytestmark = pytest.mark.asyncio(loop_scope="session")


class FakeEmbedder:
    def __init__(self, delay_s: float = 0.01, fail_times: int = 0) -> None:
        self.delay_s = delay_s
        self.batches: list[list[str]] = []
        self.fail_times = fail_times
        self.in_flight = 0
        self.max_in_flight = 0

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        if self.fail_times:
            self.fail_times -= 1
            raise EmbedderUnavailable("down")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        self.batches.append(list(texts))
        # each vector encodes its text's length so the test can check the mapping
        return np.array([[float(len(t))] * 4 for t in texts], dtype=np.float32)


def _units(counts: Sequence[int]) -> list[WorkUnit]:
    return [
        WorkUnit(f"f{i}", [f"file{i}-text{j}" + "x" * j for j in range(n)], payload=i)
        for i, n in enumerate(counts)
    ]


async def _run(
    pipeline: EmbedPipeline, units: list[WorkUnit], produce_delay: float = 0.0
) -> tuple[list[WorkUnit], list[int]]:
    written: list[WorkUnit] = []
    groups: list[int] = []

    async def produce(emit: Emit) -> None:
        for unit in units:
            if produce_delay:
                await asyncio.sleep(produce_delay)
            await emit(unit)

    async def write(group: Sequence[WorkUnit]) -> None:
        written.extend(group)
        groups.append(len(group))

    await pipeline.run(produce, write)
    return written, groups


async def test_every_unit_written_once_with_its_own_vectors() -> None:
    embedder = FakeEmbedder()
    units = _units([3, 0, 70, 1, 5, 40])
    pipeline = EmbedPipeline(embedder, batch_size=16, concurrency=3, write_group=4)
    written, groups = await _run(pipeline, units)
    assert sorted(u.key for u in written) == sorted(u.key for u in units)
    assert max(groups) <= 4
    for unit in written:
        assert unit.remaining == 0
        for text, vector in zip(unit.texts, unit.vectors, strict=True):
            assert vector is not None and vector[0] == len(text)
    assert all(len(b) <= 16 for b in embedder.batches)
    assert sum(len(b) for b in embedder.batches) == 119
    # batches are packed across file boundaries, and calls overlap
    assert any(len({t.split("-")[0] for t in b}) > 1 for b in embedder.batches)
    assert embedder.max_in_flight > 1


async def test_embedder_stays_busy_when_preparing_is_fast() -> None:
    embedder = FakeEmbedder(delay_s=0.02)
    pipeline = EmbedPipeline(embedder, batch_size=8, concurrency=2)
    units = _units([5] * 40)
    stats_holder: list[float] = []

    async def produce(emit: Emit) -> None:
        for unit in units:
            await asyncio.sleep(0.001)
            await emit(unit)

    async def write(group: Sequence[WorkUnit]) -> None:
        await asyncio.sleep(0.001)

    stats = await pipeline.run(produce, write)
    stats_holder.append(stats.busy_share)
    assert stats.texts == 200 and stats.units == 40
    assert stats.busy_share > 0.8


async def test_unavailable_embedder_is_retried() -> None:
    embedder = FakeEmbedder(fail_times=2)
    pipeline = EmbedPipeline(embedder, batch_size=8, wait_s=10)
    written, _ = await _run(pipeline, _units([3]))
    assert len(written) == 1


async def test_failures_propagate_and_stop_the_run() -> None:
    embedder = FakeEmbedder(fail_times=10)
    pipeline = EmbedPipeline(embedder, batch_size=8, wait_s=0.3)
    with pytest.raises(ExceptionGroup) as caught:
        await _run(pipeline, _units([3, 3]))
    assert caught.group_contains(EmbedderUnavailable)


async def test_empty_run() -> None:
    written, groups = await _run(EmbedPipeline(FakeEmbedder()), [])
    assert written == [] and groups == []

"""Prepare -> embed -> write, overlapped so the embedder is never idle waiting on us.

Preparing (read, parse, blame, summarise) and writing (PostgreSQL) run concurrently with
embedding: prepared units wait in a bounded queue, the dispatcher packs their texts into
full batches across unit boundaries and keeps several Embed calls in flight, and a unit
goes to the writer as soon as its last vector arrives. The bounded queues give
back-pressure, so a fast parser cannot fill memory while the embedder catches up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from cograph_api.embedder_client import EmbedderUnavailable

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]


class TextEmbedder(Protocol):
    """What the pipeline needs from the embedder client (tests wrap it to count calls)."""

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors: ...


@dataclass(eq=False)
class WorkUnit:
    """One file's worth of work: texts to embed and whatever the writer needs."""

    key: str
    texts: list[str]
    payload: Any
    vectors: list[Vectors | None] = field(default_factory=list)
    remaining: int = 0


Emit = Callable[[WorkUnit], Awaitable[None]]


@dataclass
class BusyMeter:
    """Wall time during which at least one Embed call was in flight."""

    busy_s: float = 0.0
    _in_flight: int = 0
    _since: float = 0.0

    def enter(self) -> None:
        if self._in_flight == 0:
            self._since = time.perf_counter()
        self._in_flight += 1

    def leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self.busy_s += time.perf_counter() - self._since


@dataclass
class PipelineStats:
    units: int = 0
    texts: int = 0
    batches: int = 0
    wall_s: float = 0.0
    embed_busy_s: float = 0.0

    @property
    def busy_share(self) -> float:
        return self.embed_busy_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class EmbedPipeline:
    embedder: TextEmbedder
    batch_size: int = 64
    concurrency: int = 3
    timeout_s: float = 120.0
    max_chars: int = 2000
    queue_units: int = 64
    write_group: int = 16
    retries: int = 3
    on_embedded: Callable[[int], None] | None = None

    async def run(
        self,
        produce: Callable[[Emit], Awaitable[None]],
        write: Callable[[Sequence[WorkUnit]], Awaitable[None]],
    ) -> PipelineStats:
        """Runs `produce` (which calls emit per unit) and writes every unit once embedded.

        Any stage failing cancels the others and the error propagates; units already
        written stay written (each write is its own transaction).
        """
        stats = PipelineStats()
        meter = BusyMeter()
        prepared: asyncio.Queue[WorkUnit | None] = asyncio.Queue(self.queue_units)
        ready: asyncio.Queue[WorkUnit | None] = asyncio.Queue(self.queue_units)
        started = time.perf_counter()

        async def emit(unit: WorkUnit) -> None:
            await prepared.put(unit)

        async def producer() -> None:
            await produce(emit)
            await prepared.put(None)

        async def embed_batch(batch: list[tuple[WorkUnit, int]]) -> None:
            texts = [unit.texts[i][: self.max_chars] for unit, i in batch]
            meter.enter()
            try:
                vectors = await self._embed_with_retry(texts)
            finally:
                meter.leave()
            stats.batches += 1
            stats.texts += len(texts)
            if self.on_embedded is not None:
                self.on_embedded(len(texts))
            for (unit, i), vector in zip(batch, vectors, strict=True):
                unit.vectors[i] = vector
                unit.remaining -= 1
                if unit.remaining == 0:
                    await ready.put(unit)

        async def dispatcher() -> None:
            pending: deque[tuple[WorkUnit, int]] = deque()
            slots = asyncio.Semaphore(self.concurrency)
            exhausted = False
            async with asyncio.TaskGroup() as group:
                while True:
                    # Take a slot first, then fill the batch: units prepared while we
                    # waited for the slot join this batch instead of making a small one.
                    await slots.acquire()
                    while not exhausted and len(pending) < self.batch_size:
                        if pending:
                            try:
                                unit = prepared.get_nowait()
                            except asyncio.QueueEmpty:
                                break  # send what we have: an idle embedder is the waste
                        else:
                            unit = await prepared.get()
                        if unit is None:
                            exhausted = True
                            break
                        if not unit.texts:
                            await ready.put(unit)
                            continue
                        unit.vectors = [None] * len(unit.texts)
                        unit.remaining = len(unit.texts)
                        pending.extend((unit, i) for i in range(len(unit.texts)))
                    if not pending:
                        slots.release()
                        break  # only reached once the producer is exhausted
                    size = min(self.batch_size, len(pending))
                    batch = [pending.popleft() for _ in range(size)]
                    task = group.create_task(embed_batch(batch))
                    task.add_done_callback(lambda _t: slots.release())
            await ready.put(None)

        async def writer() -> None:
            finished = False
            while not finished:
                unit = await ready.get()
                if unit is None:
                    break
                group = [unit]
                while len(group) < self.write_group:
                    try:
                        more = ready.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                    if more is None:
                        finished = True
                        break
                    group.append(more)
                await write(group)
                stats.units += len(group)

        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(producer())
            tasks.create_task(dispatcher())
            tasks.create_task(writer())
        stats.wall_s = time.perf_counter() - started
        stats.embed_busy_s = meter.busy_s
        return stats

    async def _embed_with_retry(self, texts: list[str]) -> list[Vectors]:
        delay = 0.5
        for attempt in range(self.retries + 1):
            try:
                vectors = await self.embedder.embed(texts, timeout=self.timeout_s)
                return list(vectors)
            except EmbedderUnavailable as err:
                if attempt == self.retries:
                    raise
                log.warning(
                    "embedder unavailable; retrying",
                    extra={"attempt": attempt + 1, "error": str(err)},
                )
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

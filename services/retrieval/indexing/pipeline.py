"""Prepare -> embed -> write, overlapped so the embedder is never idle waiting on us.

Preparing (read, parse, blame, summarise) and writing (PostgreSQL) run concurrently with
embedding: prepared units wait in a bounded queue, the dispatcher packs their texts into
full batches across unit boundaries and keeps several Embed calls in flight, and a unit
goes to the writer as soon as its last vector arrives. The bounded queues give
back-pressure, so a fast parser cannot fill memory while the embedder catches up. The
embedder pushes back too: its bulk lane refuses calls beyond EMBEDDER_BULK_QUEUE_TEXTS
(EmbedderBusy), and a refused batch waits for room here rather than queuing there.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from cograph_api.embedder_client import EmbedderBusy, EmbedderUnavailable

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

# Pauses before retrying a batch the embedder refused because its bulk lane was full: the
# first about one bulk slice's time (EMBEDDER_BULK_BATCH_TEXTS texts), doubling to the cap.
BUSY_FIRST_PAUSE_S = 0.2
BUSY_MAX_PAUSE_S = 2.0


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
    # How long a batch waits for an embedder that is loading or down (EmbedderUnavailable)
    # before the run fails; `on_waiting(True)` when batches start waiting, False when the
    # embedder answers again (the job's progress says so meanwhile).
    wait_s: float = 120.0
    # How long a batch waits for room in the embedder's bulk lane (EmbedderBusy: the lane
    # is full of other jobs' batches) before the run fails. The embedder is working
    # meanwhile, so this is generous; the batch is not sent until there is room, so queued
    # requests never time out inside the embedder.
    capacity_wait_s: float = 600.0
    on_embedded: Callable[[int], None] | None = None
    on_waiting: Callable[[bool], None] | None = None
    _waiting: int = field(default=0, init=False, repr=False)

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
        """Embeds one batch, waiting up to `wait_s` for an embedder that cannot answer
        (still loading its model, restarting, briefly down), retrying with backoff."""
        delay = 0.25
        gave_up_at: float | None = None
        busy_until: float | None = None
        busy_delay = BUSY_FIRST_PAUSE_S
        waiting = False
        try:
            while True:
                try:
                    vectors = await self.embedder.embed(texts, timeout=self.timeout_s)
                    return list(vectors)
                except EmbedderBusy as err:
                    # Back-pressure: the embedder is up and its bulk lane full. Wait for
                    # room (jittered, so jobs do not retry in lockstep) instead of queuing
                    # more; not "waiting for the embedder" in the job's progress.
                    now = time.monotonic()
                    if busy_until is None:
                        busy_until = now + self.capacity_wait_s
                    if now >= busy_until:
                        raise EmbedderUnavailable(
                            f"no room in the embedder's bulk lane for {self.capacity_wait_s:g} s: "
                            f"{err}"
                        ) from err
                    pause = busy_delay * (0.5 + random.random())
                    await asyncio.sleep(min(pause, busy_until - now))
                    busy_delay = min(busy_delay * 2, BUSY_MAX_PAUSE_S)
                except EmbedderUnavailable as err:
                    now = time.monotonic()
                    if gave_up_at is None:
                        gave_up_at = now + self.wait_s
                        log.warning("embedder unavailable; waiting", extra={"error": str(err)})
                    if now >= gave_up_at:
                        raise EmbedderUnavailable(
                            f"the embedder did not answer for {self.wait_s:g} s "
                            f"(RETRIEVAL_EMBEDDER_WAIT_S): {err}"
                        ) from err
                    if not waiting:
                        waiting = True
                        self._set_waiting(+1)
                    await asyncio.sleep(min(delay, max(gave_up_at - now, 0.0)))
                    delay = min(delay * 2, 5.0)
        finally:
            if waiting:
                self._set_waiting(-1)

    def _set_waiting(self, change: int) -> None:
        before = self._waiting
        self._waiting += change
        if self.on_waiting is not None and (before == 0) != (self._waiting == 0):
            self.on_waiting(self._waiting > 0)

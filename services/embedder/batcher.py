"""Coalesces concurrent embedding requests into model-sized batches, in two lanes.

Many services embed one query at a time; the model is several times faster per text in a
batch. Requests queue here, and a worker per lane drains its queue into batches, running
the model off the event loop. While a batch runs, the next one forms, so under load
batches fill up without any request waiting on a timer.

The two lanes keep searches answering while repositories are indexed (issue 28: with
one FIFO queue a query waited behind every queued indexing batch, several seconds on a
small machine, and timed out):

- the query lane (EMBED_PRIORITY_QUERY, the default) takes whole requests, up to
  `max_texts` texts a batch, on its own inference thread;
- the bulk lane (EMBED_PRIORITY_BULK: indexing, re-embedding) cuts requests into slices
  of at most `bulk_max_texts` texts and runs one slice at a time on another thread, so
  a query never waits for bulk work: at most it shares the CPU with one bounded slice
  (whose model, on onnx-int8, uses its own few threads; see app.py). The bulk lane holds
  at most `bulk_queue_texts` texts; a request that would overflow it is refused at once
  (BulkLaneFull) and the indexer retries after a pause, instead of piling up requests
  whose deadlines run out in the queue.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
EncodeFn = Callable[[list[str]], Vectors]


# The bulk lane's inference thread runs at this nice value (Linux; 0 is the default, 19
# the lowest priority): when the CPU is short, the kernel gives it to queries and to the
# other services first (searches also need retrieval and PostgreSQL), and bulk work takes
# what is left; on an idle machine it still takes a whole core.
BULK_NICE = 10


def yield_cpu_to_queries() -> None:
    """Lowers the calling thread's CPU priority to BULK_NICE (Linux: nice is per thread)."""
    if sys.platform != "linux":
        return  # elsewhere setpriority would renice the whole process
    tid = threading.get_native_id()
    try:
        # Never above the process's own nice: raising priority needs privileges.
        os.setpriority(os.PRIO_PROCESS, tid, max(BULK_NICE, os.getpriority(os.PRIO_PROCESS, tid)))
    except OSError as err:  # a sandbox may refuse; bulk work then competes as before
        log.warning("could not lower the bulk lane's CPU priority", extra={"error": str(err)})


class DeadlinePassed(Exception):
    """The request's deadline passed before its batch was run; no work was done for it."""


class BulkLaneFull(Exception):
    """The bulk lane holds `bulk_queue_texts` texts already; retry after a pause."""


@dataclass
class _Pending:
    texts: list[str]
    deadline: float | None  # time.monotonic() value
    future: asyncio.Future[Vectors]
    # Bulk requests run slice by slice: the next text to run, and the rows done so far.
    taken: int = 0
    rows: list[Vectors] = field(default_factory=list)


@dataclass
class BatchStats:
    batches: int = 0
    texts: int = 0
    expired: int = 0


@dataclass
class BulkStats(BatchStats):
    rejected: int = 0  # requests refused because the lane was full
    queued_texts: int = 0  # texts accepted and not yet run (now)


# Told of each model call: its lane ("query" or "bulk"), its texts and its seconds in the
# model (embedder.metrics counts them).
BatchObserver = Callable[[str, int, float], None]


class Batcher:
    def __init__(
        self,
        encode: EncodeFn,
        *,
        max_texts: int,
        max_wait_s: float,
        executor: Executor | None = None,
        bulk_encode: EncodeFn | None = None,
        bulk_max_texts: int = 8,
        bulk_queue_texts: int = 256,
        bulk_executor: Executor | None = None,
        observer: BatchObserver | None = None,
    ) -> None:
        self._observer = observer
        self._encode = encode
        self._bulk_encode = bulk_encode or encode
        self._max_texts = max_texts
        self._max_wait_s = max_wait_s
        self._bulk_max_texts = bulk_max_texts
        self._bulk_queue_texts = bulk_queue_texts
        # One inference thread per lane: the model parallelises internally, and a second
        # thread on the same lane would only fight for cores. The bulk lane's own thread
        # is what lets a query run while a bulk slice is in the model.
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="embed")
        self._bulk_executor = bulk_executor or ThreadPoolExecutor(
            1, thread_name_prefix="embed-bulk", initializer=yield_cpu_to_queries
        )
        self._queue: deque[_Pending] = deque()
        self._bulk: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._bulk_wakeup = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self.stats = BatchStats()
        self.bulk_stats = BulkStats()

    @property
    def bulk_max_texts(self) -> int:
        return self._bulk_max_texts

    @property
    def bulk_queue_texts(self) -> int:
        return self._bulk_queue_texts

    def queued_texts(self, lane: str) -> int:
        """Texts waiting in a lane ("query" or "bulk"), not yet in the model."""
        if lane == "bulk":
            return self.bulk_stats.queued_texts
        return sum(len(pending.texts) for pending in self._queue if not pending.future.done())

    def _observe(self, lane: str, texts: int, started: float) -> None:
        if self._observer is not None:
            self._observer(lane, texts, time.perf_counter() - started)

    def start(self) -> None:
        if not self._workers:
            loop = asyncio.get_running_loop()
            self._workers = [
                loop.create_task(self._run(), name="batcher"),
                loop.create_task(self._run_bulk(), name="batcher-bulk"),
            ]

    async def close(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        for pending in (*self._queue, *self._bulk):
            if not pending.future.done():
                pending.future.cancel()
        self._queue.clear()
        self._bulk.clear()
        self.bulk_stats.queued_texts = 0

    async def embed(
        self, texts: list[str], timeout_s: float | None = None, *, bulk: bool = False
    ) -> Vectors:
        """Queues texts and waits for their vectors; `timeout_s` is the caller's remaining
        time. `bulk` puts them in the bulk lane, which raises BulkLaneFull when full."""
        if not self._workers:
            raise RuntimeError("batcher not started")
        future: asyncio.Future[Vectors] = asyncio.get_running_loop().create_future()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = _Pending(list(texts), deadline, future)
        if not bulk:
            self._queue.append(pending)
            self._wakeup.set()
            return await future
        queued = self.bulk_stats.queued_texts
        # An empty lane takes any request (max_batch_texts may exceed the lane's size),
        # so a big request is never refused forever.
        if queued and queued + len(texts) > self._bulk_queue_texts:
            self.bulk_stats.rejected += 1
            raise BulkLaneFull(
                f"the bulk lane holds {queued} texts; {len(texts)} more would pass "
                f"EMBEDDER_BULK_QUEUE_TEXTS {self._bulk_queue_texts}"
            )
        self.bulk_stats.queued_texts += len(texts)
        self._bulk.append(pending)
        self._bulk_wakeup.set()
        try:
            return await future
        finally:
            # Whatever is left of it (expired, cancelled, failed) no longer counts.
            self.bulk_stats.queued_texts -= len(texts) - pending.taken
            pending.taken = len(texts)

    def _take_batch(self) -> list[_Pending]:
        batch: list[_Pending] = []
        count = 0
        now = time.monotonic()
        while self._queue:
            head = self._queue[0]
            if head.future.done():  # the caller went away (cancelled)
                self._queue.popleft()
                continue
            if head.deadline is not None and head.deadline <= now:
                self._queue.popleft()
                self.stats.expired += 1
                head.future.set_exception(DeadlinePassed())
                continue
            if batch and count + len(head.texts) > self._max_texts:
                break
            self._queue.popleft()
            batch.append(head)
            count += len(head.texts)
        return batch

    def _take_slice(self) -> list[tuple[_Pending, int, int]]:
        """Up to bulk_max_texts texts from the head of the bulk lane, as (request, start,
        end) ranges; a request bigger than that is finished over several slices."""
        pieces: list[tuple[_Pending, int, int]] = []
        room = self._bulk_max_texts
        now = time.monotonic()
        while self._bulk and room > 0:
            head = self._bulk[0]
            if head.future.done():
                self._bulk.popleft()
                continue
            if head.deadline is not None and head.deadline <= now:
                self._bulk.popleft()
                self.bulk_stats.expired += 1
                head.future.set_exception(DeadlinePassed())
                continue
            start = head.taken
            end = min(len(head.texts), start + room)
            pieces.append((head, start, end))
            room -= end - start
            head.taken = end
            self.bulk_stats.queued_texts -= end - start
            if end == len(head.texts):
                self._bulk.popleft()
        return pieces

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                if self._max_wait_s > 0:
                    # A short grace lets a burst of callers land in one batch.
                    await asyncio.sleep(self._max_wait_s)
            batch = self._take_batch()
            if not batch:
                continue
            texts = [text for pending in batch for text in pending.texts]
            started = time.perf_counter()
            try:
                vectors = await loop.run_in_executor(self._executor, self._encode, texts)
            except Exception as err:
                self._observe("query", len(texts), started)
                log.exception("embedding batch failed", extra={"texts": len(texts)})
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(err)
                continue
            self._observe("query", len(texts), started)
            self.stats.batches += 1
            self.stats.texts += len(texts)
            offset = 0
            for pending in batch:
                n = len(pending.texts)
                if not pending.future.done():
                    pending.future.set_result(vectors[offset : offset + n])
                offset += n

    async def _run_bulk(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._bulk:
                self._bulk_wakeup.clear()
                await self._bulk_wakeup.wait()
            pieces = self._take_slice()
            if not pieces:
                continue
            texts = [t for pending, start, end in pieces for t in pending.texts[start:end]]
            started = time.perf_counter()
            try:
                vectors = await loop.run_in_executor(self._bulk_executor, self._bulk_encode, texts)
            except Exception as err:
                self._observe("bulk", len(texts), started)
                log.exception("bulk embedding batch failed", extra={"texts": len(texts)})
                for pending, _, _ in pieces:
                    if not pending.future.done():
                        pending.future.set_exception(err)
                continue
            self._observe("bulk", len(texts), started)
            self.bulk_stats.batches += 1
            self.bulk_stats.texts += len(texts)
            offset = 0
            for pending, start, end in pieces:
                n = end - start
                if not pending.future.done():
                    pending.rows.append(vectors[offset : offset + n])
                    if end == len(pending.texts):
                        pending.future.set_result(np.concatenate(pending.rows))
                offset += n

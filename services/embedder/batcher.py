"""Coalesces concurrent embedding requests into model-sized batches.

Many services embed one query at a time; the model is several times faster per text in a
batch. Requests queue here, and one worker drains the queue into batches of at most
`max_texts` texts, running the model off the event loop. While a batch runs, the next one
forms, so under load batches fill up without any request waiting on a timer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
EncodeFn = Callable[[list[str]], Vectors]


class DeadlinePassed(Exception):
    """The request's deadline passed before its batch was run; no work was done for it."""


@dataclass
class _Pending:
    texts: list[str]
    deadline: float | None  # time.monotonic() value
    future: asyncio.Future[Vectors]


@dataclass
class BatchStats:
    batches: int = 0
    texts: int = 0
    expired: int = 0


class Batcher:
    def __init__(
        self,
        encode: EncodeFn,
        *,
        max_texts: int,
        max_wait_s: float,
        executor: Executor | None = None,
    ) -> None:
        self._encode = encode
        self._max_texts = max_texts
        self._max_wait_s = max_wait_s
        # One inference thread: the model parallelises internally; two would fight for cores.
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="embed")
        self._queue: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self.stats = BatchStats()

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="batcher")

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        for pending in self._queue:
            if not pending.future.done():
                pending.future.cancel()
        self._queue.clear()

    async def embed(self, texts: list[str], timeout_s: float | None = None) -> Vectors:
        """Queues texts and waits for their vectors; `timeout_s` is the caller's remaining time."""
        if self._worker is None:
            raise RuntimeError("batcher not started")
        future: asyncio.Future[Vectors] = asyncio.get_running_loop().create_future()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._queue.append(_Pending(list(texts), deadline, future))
        self._wakeup.set()
        return await future

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
            try:
                vectors = await loop.run_in_executor(self._executor, self._encode, texts)
            except Exception as err:
                log.exception("embedding batch failed", extra={"texts": len(texts)})
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(err)
                continue
            self.stats.batches += 1
            self.stats.texts += len(texts)
            offset = 0
            for pending in batch:
                n = len(pending.texts)
                if not pending.future.done():
                    pending.future.set_result(vectors[offset : offset + n])
                offset += n

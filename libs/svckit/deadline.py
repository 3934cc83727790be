"""A hard deadline on an awaitable: the caller gets its answer within the deadline, whatever
the awaited work does when cancelled.

`asyncio.timeout` cancels the work and then waits for it to unwind. asyncpg, for one,
unwinds by returning its connection to the pool, which on a frozen server can itself take
seconds. Here the work runs as its own task: at the deadline it is cancelled and left to
finish unwinding in the background while the caller moves on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
_background: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _background.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.debug("abandoned task failed", extra={"error": str(task.exception())})


async def within(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """The result of `work`, or TimeoutError after `seconds` (the work is cancelled)."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        _background.add(task)
        task.add_done_callback(_forget)
        raise
    if not done:
        task.cancel()
        # Kept referenced until it has unwound, and its outcome retrieved, so asyncio
        # neither collects it early nor warns that its exception was never retrieved.
        _background.add(task)
        task.add_done_callback(_forget)
        raise TimeoutError(f"no answer within {seconds:g} s")
    return task.result()

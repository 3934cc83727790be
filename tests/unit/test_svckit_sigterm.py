"""A one-shot command killed with SIGTERM unwinds (svckit.embedded.cancelled_by_sigterm)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from svckit.embedded import cancelled_by_sigterm


def test_sigterm_cancels_the_block_runs_its_cleanup_and_exits_143() -> None:
    cleaned: list[str] = []

    async def run() -> None:
        async with asyncio.timeout(10):
            with cancelled_by_sigterm():
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    await asyncio.sleep(30)
                finally:
                    cleaned.append("stopped the server")

    with pytest.raises(SystemExit) as caught:
        asyncio.run(run())
    assert caught.value.code == 143
    assert cleaned == ["stopped the server"]
    # Outside the block SIGTERM is back to what it was (the handler was removed).
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_cancellation_that_is_not_sigterm_stays_a_cancellation() -> None:
    async def run() -> None:
        with cancelled_by_sigterm():
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
            await asyncio.sleep(30)  # cancelled at once

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())

"""The backfill worker: on start-up and then periodically, embeds every note still without a
vector, so an embedder outage or a crash between insert and embed never leaves a note
unsearchable."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from commons.embedding import NoteEmbedder

log = logging.getLogger(__name__)


class BackfillWorker:
    def __init__(self, embedder: NoteEmbedder, interval_s: float) -> None:
        self._embedder = embedder
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="commons-backfill")

    async def run_once(self) -> int:
        written = await self._embedder.backfill_pass()
        if written:
            log.info("backfill embedded notes", extra={"notes": written})
        return written

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A database hiccup must not kill the worker; the next pass retries.
                log.exception("backfill pass failed")
            await asyncio.sleep(self._interval_s)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

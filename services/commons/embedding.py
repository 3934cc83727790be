"""Writing notes' vectors off the request path: one detached task per new note, and batches
for the backfill. Neither ever raises into a caller; a note that misses its vector now is
picked up by the next backfill pass.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from typing import Any

import asyncpg

from cograph_api.embedder_client import EmbedderClient, EmbedderUnavailable, Identity, Vectors
from cograph_api.embedding_space import CheckedEmbedder, EmbeddingSpace, SpaceMismatch
from commons.models import PendingEmbed
from commons.store import CommonsStore

log = logging.getLogger(__name__)

# The text embedded for a note is title + "\n\n" + body, cut to 8,000 characters.
MAX_EMBED_CHARS = 8000


def embedding_text(title: str, body: str) -> str:
    return f"{title}\n\n{body}"[:MAX_EMBED_CHARS]


class DetachedTasks:
    """Fire-and-forget tasks that are still owned: referenced until done (the event loop
    keeps only weak references) and awaited or cancelled on shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> None:
        """Lets running tasks finish for a while, then cancels the rest."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


class NoteEmbedder:
    """With a `space`, a vector is written only when its model is the one the stored
    vectors come from (recorded by the first write on a database without vectors); while
    they differ notes wait, unembedded, for `cograph reembed` and the backfill."""

    def __init__(
        self,
        store: CommonsStore,
        client: EmbedderClient | CheckedEmbedder,
        timeout_s: float,
        batch_size: int,
        space: EmbeddingSpace | None = None,
    ) -> None:
        self._store = store
        self._client = client
        self._timeout_s = timeout_s
        self._batch_size = batch_size
        self._space = space
        self.tasks = DetachedTasks()

    async def _write(self, post_id: uuid.UUID, vector: Vectors, identity: Identity) -> bool:
        space = self._space
        if space is None:
            return await self._store.set_embedding(post_id, vector)

        async def hold(conn: asyncpg.Connection) -> None:
            await space.hold_for_write(conn, identity)

        return await self._store.set_embedding(post_id, vector, hold)

    def embed_later(self, post_id: uuid.UUID, title: str, body: str) -> None:
        """Schedules the note's embedding and returns at once."""
        self.tasks.spawn(self._embed_one(post_id, title, body), name=f"embed-post-{post_id}")

    async def _embed_one(self, post_id: uuid.UUID, title: str, body: str) -> None:
        try:
            vectors, identity = await self._client.embed_identified(
                [embedding_text(title, body)], timeout=self._timeout_s
            )
            await self._write(post_id, vectors[0], identity)
        except SpaceMismatch as err:
            log.info(
                "note left unembedded: embedding model mismatch",
                extra={"post_id": str(post_id), "error": str(err)},
            )
        except EmbedderUnavailable as err:
            log.warning(
                "note left for the backfill: embedder unavailable",
                extra={"post_id": str(post_id), "error": str(err)},
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("note left for the backfill", extra={"post_id": str(post_id)})

    async def backfill_pass(self) -> int:
        """Embeds every note without a vector, oldest first; returns how many it wrote.

        Stops at the first embedder failure (the next pass retries). The keyset cursor makes
        a pass finite even if some note keeps failing for another reason.
        """
        written = 0
        cursor = None
        while True:
            batch: list[PendingEmbed] = await self._store.pending_embeds(self._batch_size, cursor)
            if not batch:
                return written
            cursor = (batch[-1].created_at, batch[-1].id)
            try:
                vectors, identity = await self._client.embed_identified(
                    [embedding_text(p.title, p.body) for p in batch], timeout=self._timeout_s
                )
            except SpaceMismatch:
                return written  # said once, at ERROR, by the space's monitor
            except EmbedderUnavailable as err:
                log.warning(
                    "backfill paused: embedder unavailable",
                    extra={"pending_batch": len(batch), "error": str(err)},
                )
                return written
            for pending, vector in zip(batch, vectors, strict=True):
                try:
                    if await self._write(pending.id, vector, identity):
                        written += 1
                except SpaceMismatch:
                    return written

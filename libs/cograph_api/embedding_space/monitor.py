"""The service side: `EmbeddingSpace` watches the embedder's model against the record,
reports the verdict (health), and wraps embedder clients so a mismatched call never
returns vectors (the package doc says how the pieces fit)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import asyncpg

from cograph_api.embedder_client import EmbedderUnavailable, Identity, Vectors
from cograph_api.embedding_space.record import (
    HEALTH_NAME,
    MISMATCH_REASON,
    SpaceMismatch,
    SpaceRecord,
    SpaceSpec,
    hold_for_write,
    read_record,
    verdict,
)
from svckit.server import GrpcHost

log = logging.getLogger(__name__)


class IdentifyingEmbedder(Protocol):
    async def embed_identified(
        self, texts: list[str], timeout: float | None = None
    ) -> tuple[Vectors, Identity]: ...

    async def identity(self) -> Identity: ...


class EmbeddingSpace:
    """A service's view of its record and of its embedder (see the module doc)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        spec: SpaceSpec,
        embedder: IdentifyingEmbedder,
        *,
        check_s: float = 10.0,
        on_verdict: Callable[[str | None], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self._pool = pool
        self._embedder = embedder
        self._check_s = check_s
        self.on_verdict = on_verdict
        self._clock = clock
        self._record: SpaceRecord | None = None
        self._record_at = 0.0
        self._identity: Identity | None = None  # the embedder's, once reached
        self._reason: str | None = None
        self._reported: str | None = None  # the last verdict logged / reported
        self._task: asyncio.Task[None] | None = None

    @property
    def embedder_identity(self) -> Identity | None:
        return self._identity

    @property
    def reason(self) -> str | None:
        """Why vectors are off now (None: they may be used)."""
        return self._reason

    async def record(self, *, fresh: bool = False) -> SpaceRecord:
        """The record, read again when older than `check_s` (or when `fresh`)."""
        if fresh or self._record is None or self._clock() - self._record_at >= self._check_s:
            async with self._pool.acquire() as conn:
                self._record = await read_record(conn, self.spec)
            self._record_at = self._clock()
        return self._record

    async def refresh(self) -> str | None:
        """Asks the embedder and the database again; returns the verdict. Raises
        EmbedderUnavailable when the embedder does not answer."""
        identity = await self._embedder.identity()
        record = await self.record(fresh=True)
        return await self._judge(record, identity)

    async def _judge(self, record: SpaceRecord, identity: Identity) -> str | None:
        self._identity = identity
        self._reason = verdict(record, identity)
        if self._reason != self._reported:
            self._reported = self._reason
            if self._reason is not None:
                log.error(
                    "embedding model mismatch: %s",
                    self._reason,
                    extra={
                        "space": self.spec.table,
                        "reason": MISMATCH_REASON,
                        "embedder_model": identity.model,
                        "embedder_dimension": identity.dimension,
                        "stored_model": record.model,
                        "stored_dimension": record.dimension,
                    },
                )
            elif record.identity is not None:
                log.info(
                    "embedding model matches the stored vectors",
                    extra={"space": self.spec.table, "model": identity.model},
                )
            if self.on_verdict is not None:
                await self.on_verdict(self._reason)
        return self._reason

    def start(self) -> None:
        """The monitor: first contact (retried while the embedder is down), then a check
        every `check_s`."""
        self._task = asyncio.get_running_loop().create_task(
            self._monitor(), name=f"{self.spec.service}-embedding-space"
        )

    async def _monitor(self) -> None:
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except EmbedderUnavailable:
                pass  # the embedder's own health says so; try again
            except Exception as err:  # a database hiccup: the next check retries
                log.warning("embedding space check failed", extra={"error": str(err)})
            await asyncio.sleep(self._check_s)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def check(self, identity: Identity) -> None:
        """Raises SpaceMismatch unless vectors of `identity` may be used with the stored
        ones (a change is logged and reported at once)."""
        record = await self.record()
        if verdict(record, identity) is not None:
            record = await self.record(fresh=True)  # may have just been re-embedded
        reason = await self._judge(record, identity)
        if reason is not None:
            raise SpaceMismatch(reason)

    async def hold_for_write(self, conn: asyncpg.Connection, identity: Identity) -> None:
        await hold_for_write(conn, self.spec, identity)

    def checked(self, client: IdentifyingEmbedder) -> CheckedEmbedder:
        return CheckedEmbedder(client, self)


class CheckedEmbedder:
    """An embedder client whose vectors are only returned when they belong with the stored
    ones; otherwise SpaceMismatch. While a mismatch is known the embedder is not called."""

    def __init__(self, client: IdentifyingEmbedder, space: EmbeddingSpace) -> None:
        self._client = client
        self._space = space

    async def embed_identified(
        self, texts: list[str], timeout: float | None = None
    ) -> tuple[Vectors, Identity]:
        if self._space.reason is not None:
            # Known already: the stored record may have changed since (a re-embed done).
            record = await self._space.record()
            identity = self._space.embedder_identity
            if verdict(record, identity) is not None:
                raise SpaceMismatch(verdict(record, identity) or MISMATCH_REASON)
        vectors, identity = await self._client.embed_identified(texts, timeout)
        await self._space.check(identity)
        return vectors, identity

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        vectors, _ = await self.embed_identified(texts, timeout)
        return vectors

    async def embed_one(self, text: str, timeout: float | None = None) -> Vectors:
        vectors = await self.embed([text], timeout)
        return vectors[0]

    async def identity(self) -> Identity:
        return await self._client.identity()


def health_reporter(host: GrpcHost) -> Callable[[str | None], Awaitable[None]]:
    """Reports a verdict on `host`'s health service under HEALTH_NAME: SERVING when
    vectors may be used, NOT_SERVING with a mismatch. Call after `host.start()`."""

    async def report(reason: str | None) -> None:
        await host.set_health(HEALTH_NAME, reason is None)

    return report

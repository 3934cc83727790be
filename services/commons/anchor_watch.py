"""Staleness checks of anchors: whenever a repository has published an index newer than the
one its anchors were last checked at, retrieval compares them (RecheckAnchors, as
COMMONS_PRINCIPAL) and the commons records each status. Notes are never deleted here.

The check runs every COMMONS_ANCHOR_CHECK_INTERVAL_S, and at once when an admin asks
(CheckAnchors). Publication is not in its path: retrieval publishes and the check follows.
Each pass asks about at most ANCHOR_REPOSITORIES_MAX repositories, sends anchors in batches
of COMMONS_ANCHOR_CHECK_BATCH, every call with a deadline, and stops after
COMMONS_ANCHOR_CHECK_INTERVAL_S (the next pass resumes with what is left: an anchor counts
as checked only once its verdict is stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import asyncpg
import grpc

from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api import limits as L
from cograph_api.anchors import COMMONS_PRINCIPAL
from commons import anchor_store
from commons.anchor_store import CheckedAnchor, Verdict
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER

log = logging.getLogger(__name__)

# The staleness check acts for the commons itself, never for whoever asked for it.
_AS_COMMONS = ((PRINCIPAL_HEADER, COMMONS_PRINCIPAL), (ADMIN_HEADER, "0"))

_STATES = {
    retrieval_pb2.ANCHOR_STATE_FRESH: "fresh",
    retrieval_pb2.ANCHOR_STATE_BODY_CHANGED: "body_changed",
    retrieval_pb2.ANCHOR_STATE_SIGNATURE_CHANGED: "signature_changed",
    retrieval_pb2.ANCHOR_STATE_MOVED: "moved",
    retrieval_pb2.ANCHOR_STATE_ORPHANED: "orphaned",
}


@dataclass(frozen=True)
class CheckOutcome:
    repositories: int  # repositories with anchors looked at
    checked: int  # anchors compared with a newer index
    changed: int  # anchors whose status changed


class AnchorWatch:
    def __init__(
        self,
        pool: asyncpg.Pool,
        retrieval: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
        *,
        interval_s: float,
        batch: int,
        timeout_s: float,
    ) -> None:
        self._pool = pool
        self._retrieval = retrieval
        self._interval_s = interval_s
        self._batch = batch
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()  # one pass at a time per process
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="commons-anchor-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the next pass tries again
                log.warning("anchor staleness check failed", extra={"error": str(err)})

    async def _recheck(
        self, request: retrieval_pb2.RecheckAnchorsRequest
    ) -> retrieval_pb2.RecheckAnchorsResponse:
        reply: retrieval_pb2.RecheckAnchorsResponse = await self._retrieval.RecheckAnchors(
            request, metadata=_AS_COMMONS, timeout=self._timeout_s
        )
        return reply

    async def check(self) -> CheckOutcome:
        """One pass over every repository with anchors; raises grpc.aio.AioRpcError when
        retrieval does not answer (what was stored before stays stored)."""
        async with self._lock:
            deadline = time.monotonic() + self._interval_s
            repos = await anchor_store.repositories(self._pool, L.ANCHOR_REPOSITORIES_MAX)
            if not repos:
                return CheckOutcome(0, 0, 0)
            reply = await self._recheck(
                retrieval_pb2.RecheckAnchorsRequest(repository_ids=[r for r, _ in repos])
            )
            published = {r.repository_id: r.generation for r in reply.repositories}
            checked = changed = 0
            for repository_id, oldest in repos:
                generation = published.get(repository_id)
                if generation is None:
                    changed += await anchor_store.orphan_repository(self._pool, repository_id)
                    continue
                while generation > oldest and time.monotonic() < deadline:
                    batch = await anchor_store.behind(
                        self._pool, repository_id, generation, self._batch
                    )
                    if not batch:
                        break
                    changed += await self._check_batch(batch, generation)
                    checked += len(batch)
                    if len(batch) < self._batch:
                        break
            return CheckOutcome(len(repos), checked, changed)

    async def _check_batch(self, batch: list[CheckedAnchor], generation: int) -> int:
        reply = await self._recheck(
            retrieval_pb2.RecheckAnchorsRequest(
                anchors=[
                    retrieval_pb2.StoredAnchor(
                        id=str(a.id),
                        repository_id=a.repository_id,
                        qualified_name=a.qualified_name,
                        path=a.path,
                        signature_hash=a.signature_hash,
                        body_hash=a.body_hash,
                    )
                    for a in batch
                ]
            )
        )
        verdicts = [
            Verdict(
                anchor,
                _STATES.get(check.state, "orphaned"),
                check.current if check.HasField("current") else None,
                check.commit,
                # A repository deleted since the pass began answers generation 0: its
                # anchors count as checked at the generation they were picked for.
                max(check.generation, generation),
            )
            for anchor, check in zip(batch, reply.checks, strict=True)
        ]
        return await anchor_store.record(self._pool, verdicts)


def unavailable(err: grpc.aio.AioRpcError) -> str:
    """What an admin asking for a check is told when retrieval does not answer."""
    return f"the staleness check could not reach retrieval ({err.code().name.lower()})"

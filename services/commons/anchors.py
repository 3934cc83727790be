"""Notes anchored to code: the commons' side.

A note's anchors are its data and live here (anchor_store); the code they point at lives in
retrieval, which the desk calls over gRPC, signed like every internal call:

- **as the caller** to resolve anchors (posting, anchoring later, confirming) and to learn
  which repositories the caller may read (a note's anchors are shown only in those);
  retrieval applies the search access rule, so an anchor in a repository the caller cannot
  read is refused exactly like one in a repository that does not exist;
- **as COMMONS_PRINCIPAL** for staleness checks (anchor_watch), which compare anchors of
  every repository and which no key can make.

Retrieval's refusals reach the caller with their own code and message.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import grpc

from cograph.commons.v1 import commons_pb2
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api import limits as L
from cograph_api.anchors import Target, check_count, check_target, given
from commons import anchor_store
from commons.anchor_store import NewAnchor
from commons.models import Anchor, AnchoredNote
from svckit.errors import (
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from svckit.requestctx import current_principal

log = logging.getLogger(__name__)

# The statuses the review listing shows when none is asked for: every one but fresh.
CHANGED = tuple(s for s in L.ANCHOR_STATUSES if s != "fresh")

_RELAYED: dict[grpc.StatusCode, type[DomainError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def relayed(err: grpc.aio.AioRpcError) -> DomainError:
    """Retrieval's refusal as the caller's error (same code, same message); anything else
    says the code index did not answer."""
    kind = _RELAYED.get(err.code())
    if kind is not None:
        return kind(err.details() or "")
    log.warning("retrieval did not answer an anchor call", extra={"error": err.details()})
    return Unavailable("anchors: the code index did not answer; try again")


def targets_of(raw: Sequence[commons_pb2.AnchorTarget], already: int = 0) -> list[Target]:
    """A request's anchors, checked (count first, then each, naming its position)."""
    check_count(len(raw), already)
    return [check_target(i, given(t)) for i, t in enumerate(raw)]


@dataclass(frozen=True)
class Viewer:
    principal: str | None
    admin: bool


def _viewer() -> Viewer:
    principal = current_principal()
    return Viewer(principal.id, principal.admin) if principal else Viewer(None, False)


class AnchorDesk:
    """Resolving, showing, confirming and reviewing anchors (not their staleness checks:
    anchor_watch)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        retrieval: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
        timeout_s: float,
    ) -> None:
        self._pool = pool
        self._retrieval = retrieval
        self._timeout_s = timeout_s

    async def resolve(self, targets: Sequence[Target]) -> list[NewAnchor]:
        """Each target resolved by retrieval as the caller; raises its refusal."""
        if not targets:
            return []
        request = retrieval_pb2.ResolveAnchorsRequest(
            targets=[
                retrieval_pb2.AnchorTarget(
                    repo=t.repo,
                    symbol=t.symbol,
                    path=t.path,
                    start_line=t.start_line,
                    end_line=t.end_line,
                )
                for t in targets
            ]
        )
        try:
            reply = await self._retrieval.ResolveAnchors(request, timeout=self._timeout_s)
        except grpc.aio.AioRpcError as err:
            raise relayed(err) from None
        return [
            NewAnchor(t.symbol, t.path, t.start_line, t.end_line, node)
            for t, node in zip(targets, reply.anchors, strict=True)
        ]

    async def readable_ids(self, ids: Sequence[int]) -> set[int]:
        """The repositories among `ids` the caller may read (all of them for an admin)."""
        viewer = _viewer()
        if viewer.admin or not ids:
            return set(ids)
        try:
            reply = await self._retrieval.ReadableRepositories(
                retrieval_pb2.ReadableRepositoriesRequest(repository_ids=sorted(set(ids))),
                timeout=self._timeout_s,
            )
        except grpc.aio.AioRpcError as err:
            raise relayed(err) from None
        return {r.id for r in reply.repositories}

    async def readable_slug(self, slug: str) -> int:
        """The id of repository `slug` when the caller may read it; else NOT_FOUND, the
        same answer as for a repository that does not exist."""
        try:
            reply = await self._retrieval.ReadableRepositories(
                retrieval_pb2.ReadableRepositoriesRequest(slugs=[slug]), timeout=self._timeout_s
            )
        except grpc.aio.AioRpcError as err:
            raise relayed(err) from None
        for repo in reply.repositories:
            if repo.slug == slug:
                return int(repo.id)
        raise NotFound(f"no repository {slug}")

    async def visible(self, anchors: Sequence[Anchor]) -> list[Anchor]:
        """The anchors whose repository the caller may read: the others are left out, their
        repository, path and name with them."""
        if not anchors:
            return []
        readable = await self.readable_ids([a.repository_id for a in anchors])
        return [a for a in anchors if a.repository_id in readable]

    async def add(
        self, post_id: uuid.UUID, raw: Sequence[commons_pb2.AnchorTarget], author_of: str
    ) -> None:
        """Anchors a posted note (its author or an admin; `author_of` is its author)."""
        viewer = _viewer()
        if not viewer.admin and viewer.principal != author_of:
            raise PermissionDenied("only its author or an admin may anchor a note")
        if not raw:
            raise InvalidArgument("anchors: give at least one")
        async with self._pool.acquire() as conn:
            already = await anchor_store.count(conn, post_id)
        resolved = await self.resolve(targets_of(raw, already))
        async with self._pool.acquire() as conn, conn.transaction():
            # Locked and counted again: two requests anchoring at once cannot pass the cap.
            await conn.execute("SELECT 1 FROM posts WHERE id = $1 FOR UPDATE", post_id)
            check_count(len(resolved), await anchor_store.count(conn, post_id))
            await anchor_store.insert(conn, post_id, resolved)

    async def confirm(self, post_id: uuid.UUID, anchor_id: uuid.UUID) -> Anchor:
        """Marks the anchor fresh at the current commit, pointing at the code it follows
        now (where it moved to, or the same symbol with its new hashes). The caller must
        read its repository; an orphaned anchor has nothing to confirm."""
        stored = await anchor_store.one(self._pool, post_id, anchor_id)
        if stored is None or stored.repository_id not in await self.readable_ids(
            [stored.repository_id]
        ):
            raise NotFound(f"anchor {anchor_id} not found")
        return await self._confirm(stored)

    async def _confirm(self, stored: Anchor) -> Anchor:
        if stored.status == "orphaned":
            raise FailedPrecondition(
                f"anchor {stored.id}: its code is gone (orphaned); anchor the note again"
            )
        place = stored.moved_to
        if stored.kind == "chunk":
            # A chunk has no name to follow: it is confirmed where it lies.
            target = Target(stored.repo, "", stored.path, stored.start_line, stored.end_line)
        elif place is not None:
            target = Target(stored.repo, place.qualified_name, place.path, 0, 0)
        else:
            target = Target(stored.repo, stored.qualified_name, stored.path, 0, 0)
        try:
            [resolved] = await self.resolve([target])
        except InvalidArgument:
            raise FailedPrecondition(
                f"anchor {stored.id}: its code is no longer where it was last seen; wait for "
                "the next check, or anchor the note again"
            ) from None
        if resolved.node.repository_id != stored.repository_id:
            raise FailedPrecondition(
                f"anchor {stored.id}: its repository was indexed again from scratch; anchor "
                "the note again"
            )
        return await anchor_store.confirm(self._pool, stored.id, resolved.node)

    async def confirm_by_vote(self, post_id: uuid.UUID) -> int:
        """An up-vote confirms the note's changed anchors the voter may read; how many.
        Best-effort: the vote stands whatever happens here."""
        stale = [
            a
            for a in await anchor_store.of_post(self._pool, post_id)
            if a.status not in ("fresh", "orphaned")
        ]
        if not stale:
            return 0
        confirmed = 0
        try:
            readable = await self.readable_ids([a.repository_id for a in stale])
            for stored in stale:
                if stored.repository_id not in readable:
                    continue
                try:
                    await self._confirm(stored)
                    confirmed += 1
                except (FailedPrecondition, NotFound, InvalidArgument, PermissionDenied):
                    continue
        except Unavailable:
            log.warning("an up-vote could not confirm its note's anchors", exc_info=True)
        return confirmed

    async def review(self, repo: str, status: str | None, limit: int) -> list[AnchoredNote]:
        """The anchors of one readable repository with `status` (None: every status but
        fresh) and their notes; NOT_FOUND for a repository the caller cannot read."""
        repository_id = await self.readable_slug(repo)
        viewer = _viewer()
        statuses = (status,) if status else CHANGED
        return await anchor_store.review(
            self._pool, repository_id, statuses, limit, viewer=viewer.principal, admin=viewer.admin
        )

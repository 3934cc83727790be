"""Notes of the commons shown beside the code an answer returns (search results, a read's
lines, each reference's enclosing symbol).

One NotesForCode call per answer, after ranking and before the token budget (so a
result's notes are counted with it), as the caller: the call is signed with the request's
principal, and the commons applies each note's visibility for it. Only code the caller may
read is asked about (the answer holds nothing else), and only code of a default branch:
anchors follow a repository's default branch, whose commit an indexed ref does not share.

The commons is an accessory here: it gets RETRIEVAL_NOTES_TIMEOUT_S, and when it is down,
slow or refuses, the answer comes without notes and says why (`notes_reason`). A circuit
breaker (the embedder's kind) makes a dead commons cost nothing per answer: after a few
failures in a row calls are not even tried for a cool-down, then one probe goes through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph_api import limits
from cograph_api.anchors import CodeTarget
from cograph_api.embedder_client import CircuitBreaker
from retrieval.indexing.refs import split_ref_slug

if TYPE_CHECKING:  # engine imports CodeNote from here
    from retrieval.search.engine import SearchHit

log = logging.getLogger(__name__)

# Why an answer's notes are missing (SearchResponse.notes_reason and its siblings).
COMMONS_UNAVAILABLE = "commons_unavailable"
TOO_MANY_TARGETS = "too_many_targets"

# The commons being unreachable or slow opens the breaker; any other refusal (a request it
# found invalid) leaves it as it is: the commons answered.
_OUTAGES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)


@dataclass(frozen=True)
class CodeNote:
    """A note as shown beside code (common.v1.CodeNote)."""

    id: str
    title: str
    score: int
    status: str


@dataclass(frozen=True)
class Found:
    """Each target's notes, in order; None with `reason` when there are none to give."""

    notes: list[list[CodeNote]] | None
    reason: str = ""

    def of(self, index: int) -> list[CodeNote]:
        return self.notes[index] if self.notes is not None else []


def on_default_branch(repo: str) -> bool:
    """Whether a row's slug is a repository's own (not `<repo>@<ref>`): anchors follow
    default branches only."""
    return bool(repo) and not split_ref_slug(repo)[1]


class NotesLookup:
    """The commons' NotesForCode, with a deadline and a circuit breaker."""

    def __init__(
        self,
        stub: commons_pb2_grpc.CommonsServiceAsyncStub,
        timeout_s: float,
        breaker: CircuitBreaker,
    ) -> None:
        self._stub = stub
        self._timeout_s = timeout_s
        self._breaker = breaker

    async def find(self, targets: Sequence[CodeTarget], per_target: int = 0) -> Found:
        """The notes of each target (at most NOTES_TARGETS_MAX of them; the caller keeps to
        it); no call at all when there are none."""
        if not targets:
            return Found([])
        if not self._breaker.admit():
            return Found(None, COMMONS_UNAVAILABLE)
        request = commons_pb2.NotesForCodeRequest(
            targets=[
                commons_pb2.CodeTarget(
                    repo=t.repo,
                    path=t.path,
                    qualified_name=t.qualified_name,
                    start_line=t.start_line,
                    end_line=t.end_line,
                )
                for t in targets
            ],
            per_target=per_target,
        )
        try:
            reply = await self._stub.NotesForCode(request, timeout=self._timeout_s)
        except grpc.aio.AioRpcError as err:
            if err.code() in _OUTAGES:
                self._breaker.failed()
            else:
                self._breaker.released()
            log.warning(
                "the commons gave no notes; answering without them",
                extra={"code": err.code().name, "error": err.details()},
            )
            return Found(None, COMMONS_UNAVAILABLE)
        except asyncio.CancelledError:
            self._breaker.released()
            raise
        self._breaker.succeeded()
        if len(reply.targets) != len(targets):
            log.warning("the commons answered for other targets than asked; notes left out")
            return Found(None, COMMONS_UNAVAILABLE)
        return Found(
            [
                [CodeNote(n.id, n.title, n.score, n.status) for n in entry.notes]
                for entry in reply.targets
            ]
        )


class Targets:
    """Distinct targets of an answer's items, and which target each item is (-1: none):
    one node returned at two layers, or one enclosing symbol of many references, is asked
    about once."""

    def __init__(self) -> None:
        self.targets: list[CodeTarget] = []
        self.of_item: list[int] = []
        self._index: dict[CodeTarget, int] = {}
        self.capped = False

    def add(self, target: CodeTarget | None) -> None:
        if target is None:
            self.of_item.append(-1)
            return
        index = self._index.get(target)
        if index is None:
            if len(self.targets) >= limits.NOTES_TARGETS_MAX:
                # A page of references may lie in more nodes than one call asks about.
                self.capped = True
                self.of_item.append(-1)
                return
            index = self._index[target] = len(self.targets)
            self.targets.append(target)
        self.of_item.append(index)

    def notes(self, found: Found) -> list[list[CodeNote]]:
        """Each item's notes."""
        return [found.of(i) if i >= 0 else [] for i in self.of_item]

    def reason(self, found: Found) -> str:
        return found.reason or (TOO_MANY_TARGETS if self.capped else "")


def hit_target(hit: SearchHit) -> CodeTarget | None:
    """What a search result asks notes for: a code node of a default branch."""
    if hit.store != "code" or not on_default_branch(hit.repo):
        return None
    return CodeTarget(hit.repo, hit.path, hit.qualified_name, hit.start_line, hit.end_line)


async def attach_to_hits(lookup: NotesLookup, hits: Sequence[SearchHit]) -> str:
    """Sets each hit's notes from one call; why some may be missing ('' when none is)."""
    targets = Targets()
    for hit in hits:
        targets.add(hit_target(hit))
    found = await lookup.find(targets.targets)
    for hit, notes in zip(hits, targets.notes(found), strict=True):
        hit.notes = notes
    return targets.reason(found)

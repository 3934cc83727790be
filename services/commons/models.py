"""The commons' domain records, as the store returns them and the servicer renders them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Place:
    """Where anchored code lies: its file, qualified name and lines."""

    path: str
    qualified_name: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Anchor:
    """A note's anchor: the code it was resolved (or last confirmed) to, and how it fares."""

    id: uuid.UUID
    post_id: uuid.UUID
    repository_id: int  # retrieval's id: decides who may see the anchor; never rendered
    repo: str
    symbol: str  # as given; '' when anchored by lines
    qualified_name: str
    path: str
    start_line: int
    end_line: int
    kind: str
    signature_hash: str
    body_hash: str
    commit: str
    status: str  # fresh, body_changed, signature_changed, moved, orphaned
    checked_commit: str
    checked_generation: int
    checked_at: datetime
    moved_to: Place | None = None


@dataclass(frozen=True)
class Post:
    id: uuid.UUID
    contributor_no: int
    title: str
    body: str
    tags: list[str]
    score: int
    comment_count: int
    created_at: datetime
    searchable: bool
    hidden: bool
    author: str  # the author's principal id: decides who sees a hidden note; never rendered
    author_name: str | None = None  # the author's display name, when they set one
    # Only those in repositories the reader may read (commons.anchors.AnchorDesk.visible).
    anchors: list[Anchor] = field(default_factory=list)


@dataclass(frozen=True)
class SearchHit:
    """A note as search returns it: body snipped, no similarity (it is never exposed)."""

    id: uuid.UUID
    contributor_no: int
    title: str
    body: str
    body_truncated: bool
    body_chars: int
    tags: list[str]
    score: int
    comment_count: int
    created_at: datetime
    author_name: str | None = None


@dataclass(frozen=True)
class PostSummary(SearchHit):
    """A note as the listing returns it: what search returns of it (body snipped alike),
    with its moderation state, which only an admin's listing can show hidden."""

    hidden: bool = field(kw_only=True)
    searchable: bool = field(kw_only=True)


@dataclass(frozen=True)
class Profile:
    """A contributor's public identity: their number (None until they first write) and
    display name (None when not set). Never their principal."""

    contributor_no: int | None
    display_name: str | None


@dataclass(frozen=True)
class Comment:
    id: uuid.UUID
    post_id: uuid.UUID
    contributor_no: int
    body: str
    created_at: datetime
    hidden: bool
    author_name: str | None = None


@dataclass(frozen=True)
class VoteOutcome:
    post_id: uuid.UUID
    score: int
    value: int  # -1, 0 (withdrawn) or 1


@dataclass(frozen=True)
class PendingEmbed:
    """A note still without a vector, with what its embedding is computed from."""

    id: uuid.UUID
    title: str
    body: str
    created_at: datetime


@dataclass(frozen=True)
class ModerationEntry:
    """One row of the moderation log: who hid, unhid or deleted what, and why."""

    id: int
    principal_id: str
    action: str  # hide, unhide, delete
    target: str  # post, comment
    target_id: uuid.UUID
    post_id: uuid.UUID
    target_author: str
    target_excerpt: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class AnchoredNote:
    """One anchor with its note, as the review listing returns it."""

    post_id: uuid.UUID
    title: str
    score: int
    anchor: Anchor

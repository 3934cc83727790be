"""The note listing's request and paging: which order, which tag, how many, and the signed
cursor that continues a listing where its previous page ended.

A page is a keyset over the listing's order: (created_at, id) newest first, or (score,
created_at, id) highest first. The cursor holds the last note's key, signed for the order
and tag it was issued for (cograph_api.cursors), so it cannot be edited, made up, or
replayed against another order or tag. A note whose score changes between two pages of
the `top` order may be listed twice or not at all: the listing reads the scores of now.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from cograph_api import limits as L
from cograph_api.cursors import INT8_MAX, UUID_FIELD, CursorCodec, Field, int_field
from commons.models import PostSummary
from svckit.errors import InvalidArgument

CURSOR_KIND: Final = "posts"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# created_at as microseconds since the epoch, up to the last instant Python's datetime holds.
_LATEST_MICROS: Final = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - _EPOCH) // (
    timedelta(microseconds=1)
)
_MICROS: Final[Field] = int_field(0, _LATEST_MICROS)
_SCORE: Final[Field] = int_field(-INT8_MAX - 1, INT8_MAX)
_SHAPES: Final[dict[str, tuple[Field, ...]]] = {
    "new": (_MICROS, UUID_FIELD),
    "top": (_SCORE, _MICROS, UUID_FIELD),
}


@dataclass(frozen=True)
class ListPage:
    """A validated listing request: its order, tag (None: every note) and page size."""

    sort: str  # one of cograph_api.limits.POST_SORTS
    tag: str | None
    size: int

    @property
    def scope(self) -> str:
        """What a cursor is bound to: the order and the tag."""
        return f"{self.sort}\x00{self.tag or ''}"


@dataclass(frozen=True)
class After:
    """The key of the last note of the previous page: the next page starts below it."""

    created_at: datetime
    id: uuid.UUID
    score: int | None = None  # the `top` order's first key


def validate_list_page(sort: str, tag: str, limit: int) -> ListPage:
    """The order (empty: newest first), the tag (trimmed and lower-cased as tags are
    stored; empty: none) and the page size (0: the default)."""
    order = sort or "new"
    if order not in L.POST_SORTS:
        raise InvalidArgument(f"sort: must be one of {', '.join(L.POST_SORTS)} (got {sort!r})")
    wanted = tag.strip().lower()
    if len(wanted) > L.TAG_MAX_CHARS:
        raise InvalidArgument(
            f"tag: must be at most {L.TAG_MAX_CHARS} characters (got {len(wanted)})"
        )
    if any(ch.isspace() for ch in wanted) or "\x00" in wanted:
        raise InvalidArgument("tag: must not contain whitespace or NUL characters")
    size = limit or L.POSTS_LIMIT_DEFAULT
    if not L.POSTS_LIMIT_MIN <= size <= L.POSTS_LIMIT_MAX:
        raise InvalidArgument(
            f"limit: must be {L.POSTS_LIMIT_MIN}..{L.POSTS_LIMIT_MAX} (got {limit})"
        )
    return ListPage(order, wanted or None, size)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def read_cursor(codec: CursorCodec, page: ListPage, cursor: str) -> After | None:
    """Where the page starts: None for the first; INVALID_ARGUMENT for a cursor this
    service did not issue for this order and tag."""
    position = codec.decode(cursor, CURSOR_KIND, page.scope, _SHAPES[page.sort])
    if position is None:
        return None
    *score, micros, post_id = position
    created_at = _EPOCH + timedelta(microseconds=micros)
    return After(created_at, uuid.UUID(post_id), score[0] if score else None)


def next_cursor(codec: CursorCodec, page: ListPage, last: PostSummary) -> str:
    """The cursor of the page after the one that ended with `last`."""
    key: list[object] = [_micros(last.created_at), str(last.id)]
    if page.sort == "top":
        key.insert(0, last.score)
    return codec.encode(CURSOR_KIND, page.scope, key)

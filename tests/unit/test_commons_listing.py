"""The note listing's request and cursors, and display names: pure logic, no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from cograph_api import limits
from cograph_api.cursors import CursorCodec
from commons.listing import ListPage, next_cursor, read_cursor, validate_list_page
from commons.models import PostSummary
from commons.profiles import validate_display_name
from svckit.errors import InvalidArgument

CODEC = CursorCodec.from_secret(b"s" * 32)
POST_ID = uuid.UUID("6f1c0a52-3b8e-4d7a-9c1e-2f4b5a6d7e8f")


def _note(score: int = 3, created_at: datetime | None = None) -> PostSummary:
    return PostSummary(
        id=POST_ID,
        contributor_no=1,
        author_name=None,
        title="t",
        body="b",
        body_truncated=False,
        body_chars=1,
        tags=[],
        score=score,
        comment_count=0,
        created_at=created_at or datetime(2026, 5, 1, 9, 30, 1, 123456, tzinfo=UTC),
        hidden=False,
        searchable=True,
    )


def test_a_page_defaults_to_newest_first_and_normalises_its_tag() -> None:
    assert validate_list_page("", "", 0) == ListPage("new", None, limits.POSTS_LIMIT_DEFAULT)
    assert validate_list_page("top", "  Auth ", 5) == ListPage("top", "auth", 5)
    for sort, tag, limit, field in (
        ("oldest", "", 0, "sort"),
        ("new", "a b", 0, "tag"),
        ("new", "a\x00", 0, "tag"),
        ("new", "", limits.POSTS_LIMIT_MAX + 1, "limit"),
    ):
        with pytest.raises(InvalidArgument, match=field):
            validate_list_page(sort, tag, limit)


@pytest.mark.parametrize("sort", limits.POST_SORTS)
def test_a_cursor_holds_the_last_notes_key_exactly(sort: str) -> None:
    page = validate_list_page(sort, "auth", 2)
    after = read_cursor(CODEC, page, next_cursor(CODEC, page, _note(score=-4)))
    assert after is not None
    assert (after.created_at, after.id) == (_note().created_at, POST_ID)
    assert after.score == (-4 if sort == "top" else None)
    assert read_cursor(CODEC, page, "") is None


def test_a_cursor_is_refused_for_another_order_tag_or_deployment() -> None:
    page = validate_list_page("new", "auth", 2)
    cursor = next_cursor(CODEC, page, _note())
    for other, codec in (
        (validate_list_page("top", "auth", 2), CODEC),
        (validate_list_page("new", "", 2), CODEC),
        (validate_list_page("new", "billing", 2), CODEC),
        (page, CursorCodec.from_secret(b"t" * 32)),
    ):
        with pytest.raises(InvalidArgument, match="cursor"):
            read_cursor(codec, other, cursor)
    # The page size is no part of the question: a cursor continues with any size.
    assert read_cursor(CODEC, validate_list_page("new", "auth", 50), cursor) is not None


@pytest.mark.parametrize(
    "position",
    [
        [-1, str(POST_ID)],  # before the epoch
        [2**62, str(POST_ID)],  # past the last datetime
        [1, "not-a-uuid"],
        [1, str(POST_ID).upper()],  # not the canonical form
        [True, str(POST_ID)],
        [1.5, str(POST_ID)],
        [1, str(POST_ID), 3],
    ],
)
def test_a_signed_cursor_with_a_hostile_position_is_refused(position: list[object]) -> None:
    """Signed with the service's own key (a leaked secret, a bug): still checked."""
    page = validate_list_page("new", "", 0)
    forged = CODEC.encode("posts", page.scope, position)
    with pytest.raises(InvalidArgument, match="cursor"):
        read_cursor(CODEC, page, forged)


def test_display_names_are_trimmed_and_blank_clears() -> None:
    assert validate_display_name("  Ada   Lovelace\u3000") == "Ada Lovelace"
    assert validate_display_name("Cafe\u0301") == "Caf\u00e9"  # NFC: one spelling per name
    assert validate_display_name("<script>alert(1)</script>") == "<script>alert(1)</script>"
    assert validate_display_name("") is None
    assert validate_display_name(" \u00a0 ") is None


@pytest.mark.parametrize(
    "hostile",
    [
        "line\nbreak",
        "bell\x07",
        "nul\x00",
        "esc\x1b[31m",
        "rtl\u202eoverride",
        "zero\u200bwidth",
        "para\u2029sep",
        "lone\ud800surrogate",
        "private\ue000use",
        "x" * (limits.DISPLAY_NAME_MAX_CHARS + 1),
        "ROOT",
        "Contributor #7",
        "#7",
        "42",
    ],
)
def test_hostile_display_names_are_refused(hostile: str) -> None:
    with pytest.raises(InvalidArgument, match="display_name"):
        validate_display_name(hostile)

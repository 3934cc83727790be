"""Input limits, tested at their edges; errors name the field and the limit."""

from __future__ import annotations

import uuid

import pytest

from commons.validation import (
    Limits,
    parse_post_id,
    validate_comment,
    validate_post,
    validate_query,
)
from svckit.errors import InvalidArgument

LIMITS = Limits()


def test_limits_at_the_edge_are_accepted() -> None:
    post = validate_post(
        "t" * 200,
        "b" * 20_000,
        [f"{i:02d}" + "x" * 30 for i in range(10)],
        LIMITS,
    )
    assert len(post.title) == 200
    assert len(post.body) == 20_000
    assert len(post.tags) == 10
    assert all(len(tag) == 32 for tag in post.tags)
    assert validate_comment("c" * 5000, LIMITS) == "c" * 5000
    assert validate_query("q" * 1000, LIMITS) == "q" * 1000


@pytest.mark.parametrize(
    ("title", "body", "tags", "needle"),
    [
        ("t" * 201, "b", [], "title: must be at most 200 characters (got 201)"),
        ("", "b", [], "title: must not be empty"),
        ("   ", "b", [], "title: must not be empty"),
        ("t", "b" * 20_001, [], "body: must be at most 20000 characters (got 20001)"),
        ("t", "", [], "body: must not be empty"),
        ("t", "b", [f"t{i}" for i in range(11)], "tags: at most 10 tags (got 11)"),
        ("t", "b", ["x" * 33], "tags: a tag must be at most 32 characters (got 33"),
        ("t", "b", ["two words"], "tags: a tag must not contain whitespace"),
        ("t", "b", [""], "tags: a tag must not be empty"),
        ("t\x00", "b", [], "title: must not contain NUL"),
    ],
)
def test_limits_past_the_edge_name_field_and_limit(
    title: str, body: str, tags: list[str], needle: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_post(title, body, tags, LIMITS)
    assert needle in caught.value.message


def test_tags_are_lowercased_and_deduplicated_before_counting() -> None:
    tags = ["Auth", "auth", " SIGNUP "] + [f"t{i}" for i in range(8)]
    assert validate_post("t", "b", tags, LIMITS).tags[:2] == ["auth", "signup"]


def test_comment_and_query_limits() -> None:
    with pytest.raises(InvalidArgument, match=r"body: must be at most 5000 characters \(got"):
        validate_comment("c" * 5001, LIMITS)
    with pytest.raises(InvalidArgument, match=r"query: must be at most 1000 characters"):
        validate_query("q" * 1001, LIMITS)


def test_post_ids_must_be_uuids() -> None:
    value = uuid.uuid4()
    assert parse_post_id(str(value)) == value
    with pytest.raises(InvalidArgument, match="post_id: must be a UUID"):
        parse_post_id("not-a-uuid")

"""Input limits for notes, comments and queries; errors name the field and the limit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from svckit.errors import InvalidArgument


@dataclass(frozen=True)
class Limits:
    title_chars: int = 200
    body_chars: int = 20_000
    tags: int = 10
    tag_chars: int = 32
    comment_chars: int = 5_000
    query_chars: int = 1_000


@dataclass(frozen=True)
class NewPost:
    title: str
    body: str
    tags: list[str]


def _text(field: str, value: str, limit: int) -> str:
    """Strips surrounding whitespace; requires 1..limit characters."""
    text = value.strip()
    if not text:
        raise InvalidArgument(f"{field}: must not be empty")
    if len(text) > limit:
        raise InvalidArgument(f"{field}: must be at most {limit} characters (got {len(text)})")
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL; say so instead of failing in the driver.
        raise InvalidArgument(f"{field}: must not contain NUL characters")
    return text


def _tags(values: list[str], limits: Limits) -> list[str]:
    """Lower-cased, de-duplicated in order, no whitespace inside a tag."""
    tags: list[str] = []
    for raw in values:
        tag = raw.strip().lower()
        if not tag:
            raise InvalidArgument("tags: a tag must not be empty")
        if len(tag) > limits.tag_chars:
            raise InvalidArgument(
                f"tags: a tag must be at most {limits.tag_chars} characters "
                f"(got {len(tag)} for {tag[:40]!r})"
            )
        if any(ch.isspace() for ch in tag) or "\x00" in tag:
            raise InvalidArgument(f"tags: a tag must not contain whitespace ({tag!r})")
        if tag not in tags:
            tags.append(tag)
    if len(tags) > limits.tags:
        raise InvalidArgument(f"tags: at most {limits.tags} tags (got {len(tags)})")
    return tags


def validate_post(title: str, body: str, tags: list[str], limits: Limits) -> NewPost:
    return NewPost(
        title=_text("title", title, limits.title_chars),
        body=_text("body", body, limits.body_chars),
        tags=_tags(tags, limits),
    )


def validate_comment(body: str, limits: Limits) -> str:
    return _text("body", body, limits.comment_chars)


def validate_query(query: str, limits: Limits) -> str:
    if len(query) > limits.query_chars:
        raise InvalidArgument(
            f"query: must be at most {limits.query_chars} characters (got {len(query)})"
        )
    if "\x00" in query:
        raise InvalidArgument("query: must not contain NUL characters")
    return query


def parse_post_id(value: str, field: str = "post_id") -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise InvalidArgument(f"{field}: must be a UUID (got {value[:60]!r})") from None

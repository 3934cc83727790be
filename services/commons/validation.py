"""Input limits for notes, comments and queries; errors name the field and the limit.

The sizes are cograph_api.limits' constants, the ones the gateway publishes in its OpenAPI
and MCP schemas; they are not settings, so the published contract cannot drift from what
this service accepts.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from cograph_api import limits as L
from svckit.errors import InvalidArgument


@dataclass(frozen=True)
class Limits:
    title_chars: int = L.POST_TITLE_MAX_CHARS
    body_chars: int = L.POST_BODY_MAX_CHARS
    tags: int = L.POST_TAGS_MAX
    tag_chars: int = L.TAG_MAX_CHARS
    comment_chars: int = L.COMMENT_MAX_CHARS
    query_chars: int = L.COMMONS_QUERY_MAX_CHARS
    reason_chars: int = L.MODERATION_REASON_MAX_CHARS
    log_limit_min: int = L.MODERATION_LOG_LIMIT_MIN
    log_limit_max: int = L.MODERATION_LOG_LIMIT_MAX
    log_limit_default: int = L.MODERATION_LOG_LIMIT_DEFAULT


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


def validate_reason(reason: str, limits: Limits) -> str:
    """A moderator's reason: required (the log says why), bounded like any other text."""
    return _text("reason", reason, limits.reason_chars)


def validate_log_page(limit: int, before_id: int, limits: Limits) -> tuple[int, int | None]:
    """The moderation log's page size (0: the default) and cursor (0: the newest)."""
    if limit == 0:
        limit = limits.log_limit_default
    if not limits.log_limit_min <= limit <= limits.log_limit_max:
        raise InvalidArgument(
            f"limit: must be {limits.log_limit_min}..{limits.log_limit_max} (got {limit})"
        )
    if before_id < 0:
        raise InvalidArgument(f"before_id: must not be negative (got {before_id})")
    return limit, before_id or None


def parse_post_id(value: str, field: str = "post_id") -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise InvalidArgument(f"{field}: must be a UUID (got {value[:60]!r})") from None


def validate_review(repo: str, status: str | None, limit: int) -> tuple[str, str | None, int]:
    """The review listing's repository, status (None: every status but fresh) and size
    (0: the default)."""
    slug = repo.strip().lower()
    if not slug or len(slug) > L.SLUG_MAX_CHARS or any(ord(ch) < 32 for ch in slug):
        raise InvalidArgument(f"repo: required, at most {L.SLUG_MAX_CHARS} characters")
    if status is not None and status not in L.ANCHOR_STATUSES:
        raise InvalidArgument(f"status: one of {', '.join(L.ANCHOR_STATUSES)}")
    if limit == 0:
        limit = L.ANCHORS_LIMIT_DEFAULT
    if not L.ANCHORS_LIMIT_MIN <= limit <= L.ANCHORS_LIMIT_MAX:
        raise InvalidArgument(
            f"limit: must be {L.ANCHORS_LIMIT_MIN}..{L.ANCHORS_LIMIT_MAX} (got {limit})"
        )
    return slug, status, limit

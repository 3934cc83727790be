"""Notes anchored to code: what both sides of the anchor calls agree on.

The commons owns a note's anchors; retrieval owns the code they point at. The commons
resolves anchors as the caller (retrieval checks read access), and re-checks them as its
own identity, COMMONS_PRINCIPAL, which retrieval accepts for RecheckAnchors only. No API
key can have that principal: key names and principals match limits.KEY_NAME_PATTERN,
which has no `/`.

`check_target` validates one anchor as a note gives it, with the bounds of
cograph_api.limits; the commons checks it before it calls retrieval and retrieval checks it
again, so each boundary names the field that was wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from cograph_api import limits as L
from svckit.errors import InvalidArgument

# The identity the commons' staleness checks act as (never an admin).
COMMONS_PRINCIPAL: Final = "cograph/commons"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Target:
    """One anchor as given: `symbol` (path optional, narrowing it) or `path` with lines."""

    repo: str
    symbol: str
    path: str
    start_line: int
    end_line: int


def _field(where: str, field: str) -> str:
    return f"{where}.{field}" if where else field


def _text(where: str, field: str, value: str, limit: int) -> str:
    text = value.strip()
    if len(text) > limit:
        raise InvalidArgument(f"{_field(where, field)}: must be at most {limit} characters")
    if _CONTROL.search(text):
        raise InvalidArgument(f"{_field(where, field)}: must not contain control characters")
    return text


def _path(where: str, value: str) -> str:
    path = _text(where, "path", value, L.PATH_MAX_CHARS)
    name = _field(where, "path")
    if path and (path.startswith("/") or "\\" in path):
        raise InvalidArgument(f"{name}: must be relative to the repository root, with '/'")
    if path and any(part in ("", ".", "..") for part in path.split("/")):
        raise InvalidArgument(f"{name}: must not contain empty, '.' or '..' segments")
    return path


def check_target(index: int, given: Target) -> Target:
    """The anchor at position `index` as given, checked and trimmed (the slug
    lower-cased); INVALID_ARGUMENT naming the field."""
    where = f"anchors[{index}]"
    slug = _text(where, "repo", given.repo, L.SLUG_MAX_CHARS).lower()
    if not slug:
        raise InvalidArgument(f"{where}.repo: required")
    name = _text(where, "symbol", given.symbol, L.SYMBOL_MAX_CHARS)
    file = _path(where, given.path)
    start_line, end_line = given.start_line, given.end_line
    if name:
        if start_line or end_line:
            raise InvalidArgument(
                f"{where}: give either symbol or path with start_line and end_line, not both"
            )
        return Target(slug, name, file, 0, 0)
    if not file:
        raise InvalidArgument(f"{where}: give a symbol, or a path with start_line and end_line")
    if not 1 <= start_line <= L.ANCHOR_LINE_MAX:
        raise InvalidArgument(f"{where}.start_line: must be between 1 and {L.ANCHOR_LINE_MAX}")
    if not start_line <= end_line <= L.ANCHOR_LINE_MAX:
        raise InvalidArgument(
            f"{where}.end_line: must be between start_line and {L.ANCHOR_LINE_MAX}"
        )
    if end_line - start_line + 1 > L.ANCHOR_LINES_MAX:
        raise InvalidArgument(f"{where}: a range of at most {L.ANCHOR_LINES_MAX} lines")
    return Target(slug, "", file, start_line, end_line)


def given(message: Any) -> Target:
    """A protobuf AnchorTarget (commons' or retrieval's, the same fields) as given."""
    return Target(message.repo, message.symbol, message.path, message.start_line, message.end_line)


def check_count(count: int, already: int = 0) -> None:
    """A note holds at most ANCHORS_PER_POST_MAX anchors, those it has included."""
    if already + count > L.ANCHORS_PER_POST_MAX:
        raise InvalidArgument(
            f"anchors: a note has at most {L.ANCHORS_PER_POST_MAX} anchors "
            f"(it would have {already + count})"
        )


@dataclass(frozen=True)
class CodeTarget:
    """A piece of code about to be shown, whose notes are asked for (NotesForCode): a node
    (its qualified name and lines) or a bare line range (qualified_name '')."""

    repo: str
    path: str
    qualified_name: str
    start_line: int
    end_line: int


def check_code_target(index: int, given: CodeTarget) -> CodeTarget:
    """The target at position `index`, checked and trimmed (the slug lower-cased);
    INVALID_ARGUMENT naming the field."""
    where = f"targets[{index}]"
    slug = _text(where, "repo", given.repo, L.SLUG_MAX_CHARS).lower()
    if not slug:
        raise InvalidArgument(f"{where}.repo: required")
    path = _path(where, given.path)
    if not path:
        raise InvalidArgument(f"{where}.path: required")
    name = _text(where, "qualified_name", given.qualified_name, L.SYMBOL_MAX_CHARS)
    if not 1 <= given.start_line <= L.ANCHOR_LINE_MAX:
        raise InvalidArgument(f"{where}.start_line: must be between 1 and {L.ANCHOR_LINE_MAX}")
    if not given.start_line <= given.end_line <= L.ANCHOR_LINE_MAX:
        raise InvalidArgument(
            f"{where}.end_line: must be between start_line and {L.ANCHOR_LINE_MAX}"
        )
    return CodeTarget(slug, path, name, given.start_line, given.end_line)


def check_code_targets(count: int, per_target: int) -> int:
    """The request's size: at most NOTES_TARGETS_MAX targets; `per_target` (0: the
    default) within its bounds. Returns the notes per target to give."""
    if count > L.NOTES_TARGETS_MAX:
        raise InvalidArgument(f"targets: at most {L.NOTES_TARGETS_MAX} (got {count})")
    if per_target == 0:
        return L.NOTES_PER_TARGET_DEFAULT
    if not L.NOTES_PER_TARGET_MIN <= per_target <= L.NOTES_PER_TARGET_MAX:
        raise InvalidArgument(
            f"per_target: must be between {L.NOTES_PER_TARGET_MIN} and "
            f"{L.NOTES_PER_TARGET_MAX} (0: {L.NOTES_PER_TARGET_DEFAULT})"
        )
    return per_target


@dataclass(frozen=True)
class Scope:
    """A scoped note search: notes anchored in repository `repo`, optionally under the path
    prefix `path` (a file, or a directory: matched up to a '/') or to `symbol` (a qualified
    name or a dotted suffix of one); '' for neither."""

    repo: str
    path: str
    symbol: str


def check_scope(repo: str, path: str, symbol: str) -> Scope | None:
    """A search's scope, checked and normalised (None: no scope); INVALID_ARGUMENT naming
    the field. The path loses a leading './' and trailing '/'s: `billing/` and
    `./billing` are the directory `billing`."""
    slug = _text("", "repo", repo, L.SLUG_MAX_CHARS).lower()
    prefix = path.strip()
    while prefix.startswith("./"):
        prefix = prefix[2:]
    prefix = _path("", prefix.rstrip("/")) if prefix.strip("/") else ""
    if path.strip() and not prefix:
        raise InvalidArgument("path: name a file or directory inside the repository")
    name = _text("", "symbol", symbol, L.SYMBOL_MAX_CHARS)
    if not slug:
        if prefix or name:
            raise InvalidArgument("repo: required with path or symbol")
        return None
    if name.startswith(".") or name.endswith(".") or ".." in name:
        raise InvalidArgument("symbol: a qualified name or a dotted suffix of one")
    return Scope(slug, prefix, name)

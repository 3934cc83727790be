"""Small text helpers shared by the extractors: signatures, comments, call targets."""

from __future__ import annotations

import inspect
import re

_WS = re.compile(r"\s+")
_DOTTED = re.compile(r"[A-Za-z_$@#][\w$@#]*(?:\.[A-Za-z_$@#][\w$@#?!=]*)*[?!]?")
_TAIL = re.compile(r"\.([A-Za-z_$#@][\w$]*[?!]?)$")
_STRING_PREFIX = re.compile(r"^[rRbBuUfFtT]*")


def normalise_ws(text: str) -> str:
    """Collapse runs of whitespace (newlines included) to one space."""
    return _WS.sub(" ", text).strip()


def _strip_brackets(text: str, open_ch: str, close_ch: str) -> str:
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch == open_ch:
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def dotted_target(text: str) -> str | None:
    """A call/base target as a ``.``-separated name, or its last member when the
    receiver is an expression (``f(x).strip`` -> ``strip``); None when there is no name.
    """
    raw = _WS.sub("", text)
    raw = raw.replace("?.", ".").replace("->", ".").replace("::", ".").replace(".*", "")
    if "<" in raw:
        raw = _strip_brackets(raw, "<", ">")
        while ".." in raw:  # ``Vec::<u8>::new`` leaves an empty segment behind
            raw = raw.replace("..", ".")
    raw = raw.lstrip(".")
    if not raw:
        return None
    if _DOTTED.fullmatch(raw):
        return raw
    tail = _TAIL.search(raw)
    return tail.group(1) if tail else None


def comment_text(raw: str) -> str:
    """A comment without its markers: ``//``, ``///``, ``//!``, ``#``, ``/* */``, ``/** */``."""
    text = raw.strip()
    if text.startswith("/*"):
        text = text[2:]
        if text.endswith("*/"):
            text = text[:-2]
        text = text.lstrip("*!")
        lines = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("*"):
                stripped = stripped[1:]
                if stripped.startswith(" "):
                    stripped = stripped[1:]
                lines.append(stripped.rstrip())
            else:
                lines.append(line.rstrip())
        return inspect.cleandoc("\n".join(lines))
    if text.startswith("//"):
        text = text[2:]
        if text[:1] in ("/", "!"):
            text = text[1:]
    elif text.startswith("#"):
        text = text.lstrip("#")
    return text[1:].rstrip() if text.startswith(" ") else text.rstrip()


def python_string_value(literal: str) -> str:
    """The text of a Python string literal used as a docstring, dedented."""
    body = _STRING_PREFIX.sub("", literal, count=1)
    for quote in ('"""', "'''", '"', "'"):
        if body.startswith(quote) and body.endswith(quote) and len(body) >= 2 * len(quote):
            body = body[len(quote) : -len(quote)]
            break
    return inspect.cleandoc(body)

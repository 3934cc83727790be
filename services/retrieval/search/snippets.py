"""Snippets: bounded excerpts that make results cite-able within a token budget.

Centred on the first query-term match, head-anchored when the text has none (a vector-only
hit often has no literal match), at most `width` characters (default
`cograph_api.limits.SNIPPET_CHARS_DEFAULT`, 80..4000), cut at line boundaries where a
newline is near enough and character by character otherwise (one very long line),
truncation always flagged. A snippet is a preview to judge and cite a result by; the full
range is one `cograph_read` away. Matching is case-insensitive and identifier-aware: the query word
`ParseConfig` also finds `parse_config`, `parse-config` and `parseconfig`.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cograph_text.identifiers import identifier_parts
from cograph_text.stopwords import FUNCTION_WORDS, is_short
from retrieval.search.query_text import snippet_text

_WORD = re.compile(r"\w+")
_JOIN = r"[_\-\s.]?"  # how identifier parts may be glued in text
# When the window would start mid-line, it moves to the next line start if that costs at
# most this share of the window and keeps the match inside: excerpts read better.
_LINE_SNAP_SHARE = 0.2
# When the window would end mid-line, it ends with the last complete line inside it if
# that keeps the match and at least this share of the width; otherwise it cuts the line.
_LINE_END_KEEP_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Snippet:
    text: str
    truncated: bool


def term_patterns(query: str) -> tuple[list[re.Pattern[str]], list[re.Pattern[str]]]:
    """(whole-word patterns, part patterns) of a query, most specific first.

    Whole words skip stopwords and single characters unless nothing else is left; parts
    are the pieces of compound identifiers (`parse`, `config`), tried only when no whole
    word occurs in the text.
    """
    words = list(dict.fromkeys(match.group(0) for match in _WORD.finditer(query)))
    strong = [w for w in words if not is_short(w) and w.lower() not in FUNCTION_WORDS] or words
    whole: list[re.Pattern[str]] = []
    parts: list[re.Pattern[str]] = []
    seen_parts: set[str] = set()
    for word in strong:
        pieces = identifier_parts(word) or [word.lower()]
        whole.append(re.compile(_JOIN.join(re.escape(p) for p in pieces), re.IGNORECASE))
        if len(pieces) > 1:
            for piece in pieces:
                if len(piece) > 2 and piece not in FUNCTION_WORDS and piece not in seen_parts:
                    seen_parts.add(piece)
                    parts.append(re.compile(re.escape(piece), re.IGNORECASE))
    return whole, parts


def first_match(text: str, query: str) -> tuple[int, int] | None:
    """(start, end) of the earliest whole-word match, else the earliest part match, for
    the words of the query's first SNIPPET_QUERY_MAX_CHARS characters."""
    whole, parts = term_patterns(snippet_text(query))
    for group in (whole, parts):
        best: tuple[int, int] | None = None
        for pattern in group:
            found = pattern.search(text)
            if found and (best is None or found.start() < best[0]):
                best = (found.start(), found.end())
        if best is not None:
            return best
    return None


def make_snippet(text: str, query: str, width: int) -> Snippet:
    """An excerpt of at most `width` characters, centred on the first query-term match,
    falling back to the head when nothing matches literally; it starts and ends at line
    boundaries when a newline is close enough, and `truncated` says whether anything of
    `text` is left out."""
    if width < 1:
        raise ValueError("width must be positive")
    if len(text) <= width:
        return Snippet(text, False)
    match = first_match(text, query)
    if match is None:
        lo, end = 0, 0
    else:
        start, end = match
        centre = (start + end) // 2
        lo = max(0, min(centre - width // 2, len(text) - width))
        if lo > 0 and text[lo - 1] != "\n":
            newline = text.find("\n", lo, lo + int(width * _LINE_SNAP_SHARE))
            if newline != -1 and newline + 1 <= start and newline + 1 + width >= end:
                lo = newline + 1
    hi = min(len(text), lo + width)
    if hi < len(text) and text[hi] != "\n":
        # End before the newline that closes the last complete line (the newline itself
        # would only cost a token).
        newline = text.rfind("\n", lo, hi)
        if newline != -1 and newline >= end and newline - lo >= width * _LINE_END_KEEP_SHARE:
            hi = newline
    return Snippet(text[lo:hi], lo > 0 or hi < len(text))

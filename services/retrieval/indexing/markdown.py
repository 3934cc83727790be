"""Markdown chunked by heading, keeping each chunk's heading path; collection heading trees.

A chunk is the text under one heading up to the next heading of any level, so a chunk's
heading path (ancestors first) says where it sits. Long sections are split at blank lines.
Headings inside fenced code blocks are code, not structure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
MARKDOWN_EXTENSIONS = (".md", ".markdown", ".mdx")


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    title: str
    line: int  # 1-based


@dataclass(frozen=True, slots=True)
class MarkdownChunk:
    path: str
    heading_path: tuple[str, ...]
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    body: str

    def embedding_text(self) -> str:
        """Heading path first: it carries the topic when the body is terse."""
        if not self.heading_path:
            return self.body
        return " > ".join(self.heading_path) + "\n" + self.body


def is_markdown(path: str) -> bool:
    return path.lower().endswith(MARKDOWN_EXTENSIONS)


def headings(text: str) -> list[Heading]:
    """ATX (`## Title`) and setext (`Title` over `===`/`---`) headings outside fences."""
    found: list[Heading] = []
    fence: str | None = None
    lines = text.splitlines()
    for index, line in enumerate(lines):
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        atx = _ATX.match(line)
        if atx:
            found.append(Heading(len(atx.group(1)), atx.group(2).strip(), index + 1))
            continue
        previous = lines[index - 1] if index else ""
        if (
            _SETEXT.match(line)
            and previous.strip()
            and not _ATX.match(previous)
            and (not found or found[-1].line != index)
            and not previous.lstrip().startswith(("-", "*", ">", "|"))
        ):
            level = 1 if line.strip().startswith("=") else 2
            found.append(Heading(level, previous.strip(), index))
    return found


def _split_long(lines: list[str], first_line: int, max_chars: int) -> list[tuple[int, int]]:
    """(start, end) 1-based ranges of at most ~max_chars, cut at blank lines when possible."""
    ranges: list[tuple[int, int]] = []
    start = 0
    size = 0
    last_blank = -1
    for i, line in enumerate(lines):
        size += len(line) + 1
        if not line.strip():
            last_blank = i
        if size > max_chars and i > start:
            cut = last_blank if last_blank > start else i
            ranges.append((first_line + start, first_line + cut))
            start = cut + 1
            size = sum(len(x) + 1 for x in lines[start : i + 1])
            last_blank = -1
    if start < len(lines):
        ranges.append((first_line + start, first_line + len(lines) - 1))
    return ranges


def chunk_markdown(path: str, text: str, max_chars: int = 2000) -> list[MarkdownChunk]:
    """One chunk per heading section (split further when longer than `max_chars`).

    The heading line is part of its section's body; sections with nothing but whitespace
    under the heading are dropped (the heading still appears in children's paths).
    """
    lines = text.splitlines()
    found = headings(text)
    # section starts: the preamble (if any), then each heading; setext headings start at
    # their title line, which `Heading.line` already points to.
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[Heading] = []
    if not found or found[0].line > 1:
        starts.append((1, ()))
    for heading in found:
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        stack.append(heading)
        starts.append((heading.line, tuple(h.title for h in stack)))
    chunks: list[MarkdownChunk] = []
    for i, (start, heading_path) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(lines)
        section = lines[start - 1 : end]
        body_lines = section[1:] if heading_path else section
        if not "\n".join(body_lines).strip():
            continue
        for lo, hi in _split_long(section, start, max_chars):
            body = "\n".join(lines[lo - 1 : hi]).strip()
            if body:
                chunks.append(MarkdownChunk(path, heading_path, lo, hi, body))
    return chunks


def heading_tree(documents: Iterable[tuple[str, str]], budget_bytes: int = 64 * 1024) -> str:
    """A flattened outline of many documents: `path: A > B > C`, one heading per line.

    Stops before `budget_bytes` (UTF-8) so the router's corpus stays bounded.
    """
    out: list[str] = []
    used = 0
    for path, text in sorted(documents):
        stack: list[Heading] = []
        for heading in headings(text):
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            line = f"{path}: " + " > ".join(h.title for h in stack)
            size = len(line.encode()) + 1
            if used + size > budget_bytes:
                return "\n".join(out)
            out.append(line)
            used += size
    return "\n".join(out)

"""Doc comments: the block of own-line comments directly above a declaration."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Node

from .rules import node_text
from .text import comment_text


@dataclass(frozen=True, slots=True)
class _Comment:
    start_row: int
    text: str


class CommentIndex:
    """Own-line comments keyed by the row they end on, so lookups cost O(block size)."""

    def __init__(self, comments: Iterable[Node], source: bytes) -> None:
        self._by_end_row: dict[int, _Comment] = {}
        for node in comments:
            start = node.start_byte
            line_start = source.rfind(b"\n", 0, start) + 1
            if source[line_start:start].strip():
                continue  # a trailing comment belongs to the code on its own line
            end_row = node.end_point.row
            if node.end_point.column == 0 and end_row > node.start_point.row:
                end_row -= 1  # line comments that swallow their newline
            self._by_end_row[end_row] = _Comment(node.start_point.row, node_text(node, source))

    def __bool__(self) -> bool:
        return bool(self._by_end_row)

    def above(self, start_row: int) -> str | None:
        """The contiguous comment block ending on the row before ``start_row``."""
        parts: list[str] = []
        row = start_row - 1
        while (comment := self._by_end_row.get(row)) is not None:
            parts.append(comment_text(comment.text))
            row = comment.start_row - 1
        if not parts:
            return None
        text = "\n".join(reversed(parts)).strip()
        return text or None

"""Line-ranged chunks for files no grammar handles (configs, prose, unknown languages)."""

from __future__ import annotations

from .nodes import TextChunk


def chunk_plain_text(
    path: str, text: str, max_lines: int = 60, overlap: int = 0
) -> list[TextChunk]:
    """Split ``text`` into chunks of at most ``max_lines`` lines (1-based, inclusive).

    A chunk prefers to end just before a blank line in its last quarter so that
    paragraphs and config blocks stay whole. Chunks are contiguous (or overlap by
    ``overlap`` lines); chunks holding only blank lines are dropped.
    """
    if max_lines < 1:
        raise ValueError("max_lines must be at least 1")
    if not 0 <= overlap < max_lines:
        raise ValueError("overlap must be in [0, max_lines)")
    lines = text.splitlines()
    chunks: list[TextChunk] = []
    start = 0
    total = len(lines)
    while start < total:
        end = min(start + max_lines, total)  # exclusive
        if end < total:
            floor = start + max(1, (3 * max_lines) // 4)
            for cut in range(end, floor, -1):
                if not lines[cut].strip():  # the next chunk starts at a blank line
                    end = cut
                    break
        body = "\n".join(lines[start:end])
        if body.strip():
            chunks.append(TextChunk(path, start + 1, end, body))
        if end >= total:
            break
        start = max(end - overlap, start + 1)
    return chunks

"""Plain-text chunking for files no grammar handles."""

from __future__ import annotations

import itertools

import pytest

from retrieval.indexing.parsing import chunk_plain_text


def test_small_file_is_one_chunk() -> None:
    chunks = chunk_plain_text("notes.txt", "a\nb\nc\n")
    assert [(c.path, c.start_line, c.end_line, c.text) for c in chunks] == [
        ("notes.txt", 1, 3, "a\nb\nc")
    ]


def test_chunks_cover_every_line_in_order() -> None:
    lines = [f"line {i}" for i in range(1, 251)]
    chunks = chunk_plain_text("big.cfg", "\n".join(lines), max_lines=60)
    assert chunks[0].start_line == 1
    assert chunks[-1].end_line == 250
    for before, after in itertools.pairwise(chunks):
        assert after.start_line == before.end_line + 1
    for chunk in chunks:
        assert chunk.end_line - chunk.start_line + 1 <= 60
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def test_prefers_to_break_at_a_blank_line() -> None:
    text = "\n".join(["x"] * 50 + [""] + ["y"] * 20)
    chunks = chunk_plain_text("f.ini", text, max_lines=60)
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 50)
    assert chunks[1].start_line == 51


def test_overlap_and_blank_files() -> None:
    text = "\n".join(str(i) for i in range(1, 21))
    chunks = chunk_plain_text("f", text, max_lines=10, overlap=2)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 10), (9, 18), (17, 20)]
    assert chunk_plain_text("empty", "") == []
    assert chunk_plain_text("blank", "\n\n  \n") == []
    with pytest.raises(ValueError):
        chunk_plain_text("f", text, max_lines=0)

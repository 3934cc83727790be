"""Query-set pieces that need no installed package: answers, halves, sentences."""

from __future__ import annotations

from bench.quality.datasets import (
    Answer,
    Query,
    _assign_halves,
    _first_paragraph,
    usable_sentence,
)


def test_code_answers_match_on_qualified_name_docs_on_lines() -> None:
    code = Answer("r", "a.py", "a.f", 10, 20)
    assert code.matches("r", "a.py", "a.f", 1, 2)
    assert not code.matches("r", "a.py", "a.g", 10, 20)
    assert not code.matches("other", "a.py", "a.f", 10, 20)
    doc = Answer("r", "README.md", "", 10, 20)
    assert doc.matches("r", "README.md", "Intro > Setup", 18, 30)
    assert doc.matches("r", "README.md", "", 5, 10)
    assert not doc.matches("r", "README.md", "", 21, 30)
    assert not doc.matches("r", "other.md", "", 10, 20)


def test_halves_are_balanced_per_class_and_seeded() -> None:
    answer = Answer("r", "a.py", "a.f", 1, 2)
    queries = [Query("", "symbol", "bare", "python", f"q{i}", answer, 0) for i in range(10)]
    queries += [Query("", "docs", "t", "markdown", f"d{i}", answer, 0) for i in range(4)]
    first = _assign_halves(queries, 5)
    assert first == _assign_halves(queries, 5)
    assert [q.id for q in first[:2]] == ["symbol-00000", "symbol-00001"]
    for klass, n in (("symbol", 10), ("docs", 4)):
        halves = [q.half for q in first if q.klass == klass]
        assert len(halves) == n and sum(halves) == n // 2
    assert [q.half for q in first] != [q.half for q in _assign_halves(queries, 6)]


def test_usable_sentence() -> None:
    assert usable_sentence("Return the value stored under a key.", 5)
    assert not usable_sentence("Too short here.", 5)
    assert not usable_sentence("TODO: make this work better soon please", 5)
    assert not usable_sentence("See https://example.com for all the details", 5)


def test_first_paragraph_skips_code_tables_and_badges() -> None:
    lines = [
        "![badge](x.svg)",
        "",
        "```js",
        "const a = 1",
        "```",
        "",
        "| a | b |",
        "",
        "The cache keeps the most recently used",
        "entries in memory.",
        "",
        "Second paragraph.",
    ]
    assert _first_paragraph(lines) == "The cache keeps the most recently used entries in memory."

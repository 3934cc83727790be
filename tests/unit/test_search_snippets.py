"""Snippets at their edges: centring, the head fallback, widths, identifier-aware matches."""

from __future__ import annotations

import pytest

from retrieval.search.snippets import first_match, make_snippet


def test_short_text_is_whole_and_not_truncated() -> None:
    assert make_snippet("def f(): pass", "f", 80) == make_snippet("def f(): pass", "zz", 80)
    snippet = make_snippet("x" * 80, "x", 80)
    assert snippet.text == "x" * 80 and not snippet.truncated
    assert make_snippet("", "anything", 80).text == ""


def test_centred_on_the_first_match() -> None:
    text = "a" * 1000 + "NEEDLE" + "b" * 1000
    snippet = make_snippet(text, "needle", 100)
    assert len(snippet.text) == 100 and snippet.truncated
    at = snippet.text.index("NEEDLE")
    assert abs(at + 3 - 50) <= 1  # the match sits in the middle


def test_match_near_the_start_or_end_clamps_to_the_edge() -> None:
    text = "NEEDLE" + "b" * 1000
    head = make_snippet(text, "needle", 100)
    assert head.text.startswith("NEEDLE") and len(head.text) == 100 and head.truncated
    tail_text = "a" * 1000 + "NEEDLE"
    tail = make_snippet(tail_text, "needle", 100)
    assert tail.text.endswith("NEEDLE") and len(tail.text) == 100 and tail.truncated


def test_no_literal_match_is_head_anchored() -> None:
    text = "first line\n" + "z" * 1000 + " needle"
    assert make_snippet(text, "absent", 80).text == text[:80]
    assert make_snippet(text, "needle", 80).text.endswith("needle")


def test_window_snaps_to_a_line_start_when_cheap() -> None:
    text = "\n".join(f"line {i:03d} " + "x" * 20 for i in range(100)) + "\nthe needle here\n"
    snippet = make_snippet(text, "needle", 200)
    assert "needle" in snippet.text
    assert snippet.text.startswith("line ") or snippet.text.startswith("the needle")


def test_identifier_aware_and_case_insensitive() -> None:
    assert first_match("x = parse_config(y)", "ParseConfig") == (4, 16)
    assert first_match("call PARSE-CONFIG now", "parseConfig") == (5, 17)
    assert first_match("return parseconfig", "ParseConfig") == (7, 18)
    # Parts are a fallback when the whole identifier never occurs.
    assert first_match("load the config file", "ParseConfig") == (9, 15)


def test_stopwords_do_not_anchor_a_prose_query() -> None:
    text = "a " * 300 + "retry the charge"
    found = first_match(text, "how does a retry work")
    assert found is not None and text[found[0] : found[1]] == "retry"
    # But a query made only of stopwords still matches.
    assert first_match("it is what it is", "is") == (3, 5)


@pytest.mark.parametrize("width", [80, 600, 4000])
def test_width_is_never_exceeded(width: int) -> None:
    text = ("word " * 2000) + "target" + (" word" * 2000)
    snippet = make_snippet(text, "target", width)
    assert len(snippet.text) == width and snippet.truncated and "target" in snippet.text


def test_rejects_a_non_positive_width() -> None:
    with pytest.raises(ValueError):
        make_snippet("abc", "a", 0)

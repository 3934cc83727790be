"""Snippets at their edges: centring, the head fallback, widths, identifier-aware matches."""

from __future__ import annotations

import random

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


def test_window_ends_after_the_last_complete_line() -> None:
    lines = [f"line {i:03d} " + "x" * (10 + i % 37) for i in range(100)]
    lines[50] = "the needle here"
    text = "\n".join(lines)
    for width in (120, 200, 400, 600):
        snippet = make_snippet(text, "needle", width)
        assert "needle" in snippet.text and snippet.truncated
        assert len(snippet.text) <= width
        at = text.index(snippet.text)
        end = at + len(snippet.text)
        assert text[end] == "\n"  # ends where a line ends, not mid-line
        assert at == 0 or text[at - 1] == "\n"  # and starts where one starts
        assert len(snippet.text) >= width // 2
        # Every line of the excerpt is a whole line of the text.
        assert all(line in lines for line in snippet.text.split("\n"))


def test_head_anchored_window_ends_on_a_line_too() -> None:
    text = "\n".join(f"row {i:02d} " + "y" * 30 for i in range(40))
    snippet = make_snippet(text, "absent", 200)
    assert text.startswith(snippet.text) and snippet.truncated
    assert len(snippet.text) <= 200 and text[len(snippet.text)] == "\n"
    assert not snippet.text.endswith("\n")


def test_a_long_single_line_is_cut_by_characters() -> None:
    text = "short\n" + "a" * 3000 + "NEEDLE" + "b" * 3000 + "\nshort"
    snippet = make_snippet(text, "needle", 400)
    assert len(snippet.text) == 400 and "NEEDLE" in snippet.text and snippet.truncated
    assert "\n" not in snippet.text
    # A newline too close to the start to keep half the width does not shorten the cut.
    head = make_snippet("ab\n" + "c" * 1000, "absent", 100)
    assert head.text == ("ab\n" + "c" * 1000)[:100]


def test_a_window_already_on_line_edges_keeps_its_lines() -> None:
    # Lines of exactly 10 characters (9 + newline): the centred window may already begin
    # at a line start; it must not skip that line.
    text = "".join(f"{i:08d}\n" for i in range(200)).replace("00000100", "needle00")
    snippet = make_snippet(text, "needle00", 100)
    assert "needle00" in snippet.text and len(snippet.text) <= 100
    at = text.index(snippet.text)
    assert (at == 0 or text[at - 1] == "\n") and text[at + len(snippet.text)] == "\n"


def _random_text(rng: random.Random) -> str:
    words = ["alpha", "beta", "gamma", "Needle", "parse_config", "x", "", "    ", "{", "}"]
    lines = []
    for _ in range(rng.randint(0, 80)):
        if rng.random() < 0.05:
            lines.append("z" * rng.randint(100, 2000))  # a very long line now and then
        else:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(0, 15))))
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(40))
def test_random_texts_keep_the_contract(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        text = _random_text(rng)
        query = rng.choice(["needle", "ParseConfig", "absent", "gamma beta"])
        width = rng.choice([80, 150, 300, 400, 600, 4000])
        snippet = make_snippet(text, query, width)
        assert len(snippet.text) <= width
        assert snippet.text in text
        # `truncated` is honest: set exactly when something of the text is left out.
        assert snippet.truncated == (len(snippet.text) < len(text))
        if len(text) <= width:
            assert snippet.text == text
        else:  # a cut keeps at least half the width
            assert len(snippet.text) >= width // 2
        match = first_match(text, query)
        if match is not None and match[1] - match[0] <= width // 2:
            assert text[match[0] : match[1]] in snippet.text
            at = text.find(snippet.text, max(0, match[1] - len(snippet.text)))
            assert at <= match[0] and match[1] <= at + len(snippet.text)


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

"""Query parsing and LIKE escaping for commons search."""

from __future__ import annotations

import pytest

from commons.query import escape_like, like_pattern, parse_query


def test_plain_query_has_no_phrases() -> None:
    parsed = parse_query("  add a   registration form ")
    assert parsed.phrases == ()
    assert parsed.semantic_text == "add a registration form"


def test_quoted_phrases_are_filters_and_still_feed_the_embedding() -> None:
    parsed = parse_query('retry "exponential backoff" in "billing"')
    assert parsed.phrases == ("exponential backoff", "billing")
    assert parsed.semantic_text == "retry exponential backoff in billing"


def test_inner_whitespace_of_a_phrase_is_kept_literally() -> None:
    assert parse_query('"a  b"').phrases == ("a  b",)


def test_unpaired_quote_opens_no_phrase() -> None:
    parsed = parse_query('"closed" and "never closed')
    assert parsed.phrases == ("closed",)
    assert parsed.semantic_text == "closed and never closed"


@pytest.mark.parametrize("raw", ['""', '"   "', 'a "" b'])
def test_empty_phrases_are_ignored(raw: str) -> None:
    assert parse_query(raw).phrases == ()


def test_duplicate_phrases_collapse_case_insensitively() -> None:
    assert parse_query('"Foo" "foo"').phrases == ("Foo",)


def test_only_quotes_leaves_no_semantic_text() -> None:
    assert parse_query('" " ""').semantic_text == ""


@pytest.mark.parametrize(
    ("phrase", "escaped"),
    [
        ("100%", "100\\%"),
        ("snake_case", "snake\\_case"),
        ("C:\\temp", "C:\\\\temp"),
        ("\\%_", "\\\\\\%\\_"),
        ("plain words", "plain words"),
    ],
)
def test_like_metacharacters_are_escaped(phrase: str, escaped: str) -> None:
    assert escape_like(phrase) == escaped
    assert like_pattern(phrase) == f"%{escaped}%"

"""Query tokenisation for routing: identifiers whole and in parts, stop words out."""

from __future__ import annotations

import pytest

from router.terms import QueryTerm, escape_like, query_terms, tokenize


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("How does billing.retry work?", ["billing.retry", "billing", "retry"]),
        ("parse_config", ["parse_config", "parse", "config"]),
        ("ParseConfig", ["parseconfig", "parse", "config"]),
        ("HTTPServer", ["httpserver", "http", "server"]),
        (
            "where is src/billing/retry.py",
            ["src/billing/retry.py", "src", "billing", "retry", "py"],
        ),
        ("the cograph-router", ["cograph-router", "cograph", "router"]),
        ("Billing BILLING billing", ["billing"]),
        ("retry? retry! (retry)", ["retry"]),
        ("what is the code for it", []),
        ("v2 of python3 in 2024", ["v2", "python3", "python"]),
        ("café au lait", ["café", "au", "lait"]),
        ("a b c", []),
    ],
)
def test_tokenize(question: str, expected: list[str]) -> None:
    assert tokenize(question) == expected


def test_parse_config_spellings_share_their_parts() -> None:
    snake, camel = set(tokenize("parse_config")), set(tokenize("ParseConfig"))
    assert snake & camel == {"parse", "config"}


def test_terms_are_capped_in_question_order() -> None:
    terms = query_terms("alpha beta gamma delta", 2)
    assert [t.text for t in terms] == ["alpha", "beta"]


def test_short_terms_match_whole_entries_and_long_ones_substrings() -> None:
    assert QueryTerm("db", False).like_pattern == "db"
    assert query_terms("db", 5) == [QueryTerm("db", False)]
    assert query_terms("retry", 5)[0].like_pattern == "%retry%"


def test_like_metacharacters_are_escaped() -> None:
    assert escape_like("a_b%c\\d") == "a\\_b\\%c\\\\d"
    assert QueryTerm("parse_config", True).like_pattern == "%parse\\_config%"


def test_only_plain_alphanumeric_terms_use_the_token_postings() -> None:
    by_text = {t.text: t.via_tokens for t in query_terms("billing.retry parse_config db café", 10)}
    assert by_text == {
        "billing.retry": False,  # separators: matched against whole entries
        "billing": True,
        "retry": True,
        "parse_config": False,
        "parse": True,
        "config": True,
        "db": False,  # short: whole entries only
        "café": False,  # outside [a-z0-9]: the token split would not keep it whole
    }

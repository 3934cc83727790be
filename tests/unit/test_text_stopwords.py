"""cograph_text.stopwords: what search and the router drop from a question, and why the two
lists differ."""

from __future__ import annotations

from cograph_text.stopwords import (
    CODE_KEYWORDS,
    FUNCTION_WORDS,
    MIN_WORD_CHARS,
    ROUTER_STOP_WORDS,
    is_short,
)
from retrieval.search.query_text import code_tsquery, doc_tsquery
from router.terms import tokenize


def test_lists_are_lowercase_words() -> None:
    for words in (FUNCTION_WORDS, CODE_KEYWORDS, ROUTER_STOP_WORDS):
        assert words and all(w.isalpha() and w == w.lower() for w in words)


def test_the_router_drops_every_function_word_search_drops_and_more() -> None:
    assert FUNCTION_WORDS < ROUTER_STOP_WORDS
    extra = ROUTER_STOP_WORDS - FUNCTION_WORDS
    # The words a question to a router is phrased with.
    assert {"code", "find", "show", "explain", "works"} <= extra
    # Identifier parts a code query in words must still match (`getUser`, `findById`).
    assert not {"get", "find", "show", "let", "must"} & FUNCTION_WORDS


def test_keywords_are_dropped_only_from_code_queries() -> None:
    shared = CODE_KEYWORDS & FUNCTION_WORDS
    assert shared == {"this"}
    assert "string" in CODE_KEYWORDS and "string" not in ROUTER_STOP_WORDS


def test_short_words() -> None:
    assert MIN_WORD_CHARS == 2
    assert is_short("x") and is_short("") and not is_short("db") and not is_short("é中")


def test_search_and_the_router_apply_their_lists() -> None:
    question = "how does the code find a string in ParseConfig"
    # Search keeps `code` and `find` (not function words) and drops `string` from code
    # queries only; a one-letter word goes from code queries.
    assert "find" in code_tsquery(question) and "string" not in code_tsquery(question)
    assert "string" in doc_tsquery(question) and "how" not in doc_tsquery(question)
    assert "(x & parseconfig)" not in code_tsquery("x ParseConfig")
    # The router drops `code` and `find` too.
    assert tokenize(question) == ["string", "parseconfig", "parse", "config"]

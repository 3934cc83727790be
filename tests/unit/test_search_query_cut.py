"""What each part of a search reads of a long query: the symbol stream's trigram match and
the snippets get a bounded head of it, whatever the caller sent (up to 4,000 characters)."""

from __future__ import annotations

import random
import string

from cograph_api import limits
from cograph_api.access_rules import Viewer
from retrieval.search.query_text import (
    SNIPPET_QUERY_MAX_CHARS,
    SYMBOL_QUERY_MAX_CHARS,
    cut_text,
    snippet_text,
    symbol_text,
)
from retrieval.search.search_sql import Scope, symbol_sql
from retrieval.search.snippets import first_match


def _random_query(chars: int = limits.SEARCH_QUERY_MAX_CHARS) -> str:
    rng = random.Random(3)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append("".join(rng.choices(string.ascii_letters, k=rng.randint(1, 12))))
    return " ".join(words)[:chars]


def test_cut_text_edges() -> None:
    assert cut_text("abc def", 7) == "abc def"  # exactly at the limit: whole
    assert cut_text("abc def", 6) == "abc"  # never half a word
    assert cut_text("abc def ghi", 7) == "abc def"  # the cut falls on a space
    assert cut_text("abcdefghij", 4) == "abcd"  # one long word: cut inside it
    assert cut_text("abc\tdefgh", 6) == "abc"


def test_a_4000_character_query_reaches_the_symbol_stream_cut() -> None:
    query = _random_query()
    assert len(query) == limits.SEARCH_QUERY_MAX_CHARS
    _, args = symbol_sql(Scope(Viewer("alice", False)), query, 300)
    texts = [a for a in args if isinstance(a, str)]
    assert texts and max(len(t) for t in texts) <= SYMBOL_QUERY_MAX_CHARS
    assert symbol_text(query) == cut_text(query, SYMBOL_QUERY_MAX_CHARS)


def test_a_short_query_reaches_the_symbol_stream_whole() -> None:
    name = "billing.retry.Backoff.next_delay"
    _, args = symbol_sql(Scope(Viewer("alice", False)), f"  {name} ", 300)
    assert name in args


def test_snippets_look_for_the_words_of_the_head_only() -> None:
    head = "alpha " * (SNIPPET_QUERY_MAX_CHARS // 6)
    assert first_match("x omega y", head + " omega") is None  # past the cut
    assert first_match("x alpha y", head + " omega") == (2, 7)
    assert len(snippet_text(_random_query())) <= SNIPPET_QUERY_MAX_CHARS

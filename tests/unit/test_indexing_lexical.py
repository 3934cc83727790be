"""The code index's and lexical queries' terms (identifier splitting itself:
test_text_identifiers.py)."""

from __future__ import annotations

import pytest

from retrieval.search.lexemes import lexical_terms, lexical_text, query_terms
from retrieval.search.query_text import code_tsquery, subject_names, type_names
from retrieval.search.search_settings import SearchSettings
from svckit.config import ConfigError, Env


def test_terms_keep_joined_form_then_parts() -> None:
    assert lexical_terms("ParseConfig.load(path)") == [
        "parseconfig",
        "parse",
        "config",
        "load",
        "path",
    ]
    # snake and camel spellings of one identifier meet on the joined form
    assert lexical_terms("parse_config")[0] == lexical_terms("ParseConfig")[0]


def test_index_text_and_query_agree() -> None:
    indexed = set(lexical_text("def parse_config(self) -> Config:").split())
    assert set(query_terms("ParseConfig")) <= indexed
    assert set(query_terms("parse config")) <= indexed


def test_text_cap() -> None:
    assert lexical_text("alpha beta", max_chars=5) == "alpha"


def test_without_identifier_splitting_terms_are_alphanumeric_runs() -> None:
    text = "ParseConfig.load_file(HTTPServer2)"
    assert lexical_terms(text, split=False) == ["parseconfig", "load", "file", "httpserver2"]
    assert lexical_text(text, split=False) == "parseconfig load file httpserver2"
    assert code_tsquery("ParseConfig loader", split=False) == "(parseconfig & loader)"
    assert "parse" in code_tsquery("ParseConfig loader")


def test_splitting_is_no_longer_a_setting() -> None:
    env = Env({"RETRIEVAL_LEXICAL_SPLIT_IDENTIFIERS": "false"})
    with pytest.raises(ConfigError, match="RETRIEVAL_LEXICAL_SPLIT_IDENTIFIERS"):
        SearchSettings.from_env(env)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("The FastTimer class is a data structure", {"FastTimer"}),
        ("Main export, the Minipass class", {"Minipass"}),
        ("The EventSource interface is used to receive events", {"EventSource"}),
        (
            "interface `Reader` and struct Buffer, enum Mode, trait Codec",
            {"Reader", "Buffer", "Mode", "Codec"},
        ),
        ("Registers the current tqdm class with pandas", {"tqdm"}),
        ("Encodes a JSON object from arbitrary data", set()),  # `object`, `type`: not read
        ("the return type of a classifier", set()),
        ("classes and subclasses", set()),
        ("a class, the Widget class", {"Widget"}),  # punctuation ends the phrase
        ("", set()),
    ],
)
def test_type_names_are_the_names_a_question_calls_a_type(query: str, names: set[str]) -> None:
    assert type_names(query) == frozenset(names)


def test_type_names_stay_linear_on_hostile_text() -> None:
    # A long run of keywords and a long word (queries are capped far below this) are read
    # token by token, in one pass; a type word next to a type word names nothing.
    text = "class " * 20_000 + "x" * 20_000
    assert type_names(text) == frozenset({"x" * 20_000})


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("MockPool provides an API that extends the Pool", {"MockPool"}),
        ("NotExistError is the error returned when a flag is missing", {"NotExistError"}),
        ("`LRUCache`: a bounded map", {"LRUCache"}),
        ("  getServerName, given a host", {"getServerName"}),  # any such name; kinds decide
        ("Stream which pipes the response", set()),  # one capital: how sentences start
        ("MockPool.intercept returns a scope", set()),  # a member of it, not the class
        ("HTTP requests are retried", set()),  # no lower-case letter: an acronym
        ("How does the MockPool intercept", set()),  # not the first word
        ("mock_pool provides", set()),  # no capital inside
        ("", set()),
        ("   ", set()),
    ],
)
def test_subject_names_are_the_code_name_a_question_opens_with(query: str, names: set[str]) -> None:
    assert subject_names(query) == frozenset(names)


def test_subject_names_read_one_word_of_hostile_text() -> None:
    # A single 40,000-character word, and one followed by a long tail: one split, one pass.
    word = "aB" * 20_000
    assert subject_names(word) == frozenset({word})
    assert subject_names("XyZ" + " z" * 20_000) == frozenset({"XyZ"})
    assert subject_names("a.B" * 10_000) == frozenset()

"""Identifier splitting shared by the code index and lexical queries."""

from __future__ import annotations

import pytest

from retrieval.search.lexemes import (
    identifier_parts,
    lexical_terms,
    lexical_text,
    query_terms,
)
from retrieval.search.query_text import code_tsquery
from retrieval.search.search_settings import SearchSettings
from retrieval.settings import IndexSettings
from svckit.config import Env


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("ParseConfig", ["parse", "config"]),
        ("parse_config", ["parse", "config"]),
        ("HTTPServer", ["http", "server"]),
        ("getHTTPResponse2", ["get", "http", "response", "2"]),
        ("__init__", ["init"]),
        ("simple", ["simple"]),
        ("SCREAMING_CASE", ["screaming", "case"]),
        ("café", ["café"]),
    ],
)
def test_identifier_parts(word: str, parts: list[str]) -> None:
    assert identifier_parts(word) == parts


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


def test_index_and_search_read_the_same_splitting_setting() -> None:
    env = Env({"RETRIEVAL_LEXICAL_SPLIT_IDENTIFIERS": "false"})
    assert IndexSettings.from_env(env).split_identifiers is False
    assert SearchSettings.from_env(env).split_identifiers is False
    assert IndexSettings.from_env(Env({})).split_identifiers is True
    assert SearchSettings.from_env(Env({})).split_identifiers is True

"""Layer <-> store mapping, request validation and the lexical query text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from retrieval.layers import (
    BROAD,
    LAYERS,
    STORES,
    Store,
    Unit,
    layers_of_unit,
    parse_layer_weights,
    resolve_layers,
    stores_for,
    units_for,
)
from retrieval.search.fusion import StreamName
from retrieval.search.query import build_query
from retrieval.search.query_text import code_tsquery, doc_tsquery, has_text
from retrieval.search.search_settings import RANKING_SETTINGS, RETIRED_SETTINGS, SearchSettings
from retrieval.search.streams import StreamTask, plan_streams
from retrieval.term_statistics import COLLECTION_FIELDS, REPOSITORY_FIELDS, field_of
from scripts.config_docs import Recorder, RecordingEnv
from svckit.config import ConfigError, Env
from svckit.errors import InvalidArgument

SETTINGS = SearchSettings.from_env(Env({}))


def test_broad_is_code_summary_and_docs_never_bare_ast() -> None:
    assert resolve_layers([], collection=False) == BROAD == {"code", "ast_summary", "repo_doc"}
    assert "ast" not in BROAD
    assert resolve_layers([], collection=True) == {"md_collection"}
    assert resolve_layers(["AST", " code "], collection=False) == {"ast", "code"}


def test_layers_map_to_stores_and_units() -> None:
    assert stores_for(["code", "ast", "ast_summary"]) == ("code",)
    assert stores_for(["repo_doc", "code"]) == ("code", "repo_docs")
    assert stores_for(["md_collection"]) == ("md_collections",)
    assert units_for("code", ["code", "ast", "ast_summary", "repo_doc"]) == ("body", "summary")
    assert units_for("code", ["ast"]) == ("body",)
    assert units_for("repo_docs", ["repo_doc"]) == ("doc",)
    assert layers_of_unit("code", "body", ["ast", "code", "ast_summary"]) == ("code", "ast")
    assert layers_of_unit("code", "summary", ["ast", "code"]) == ()


@pytest.mark.parametrize(
    ("layers", "collection"),
    [(["nope"], False), (["md_collection"], False), (["code"], True), (["repo_doc"], True)],
)
def test_bad_layers_are_invalid(layers: list[str], collection: bool) -> None:
    with pytest.raises(InvalidArgument):
        resolve_layers(layers, collection)


def test_stream_plan() -> None:
    units: dict[Store, tuple[Unit, ...]] = {"code": ("body", "summary"), "repo_docs": ("doc",)}
    every: frozenset[StreamName] = frozenset({"vector", "lexical", "symbol"})
    plan = plan_streams(units, every, has_text=True)
    assert StreamTask("code", "body", "symbol") in plan
    assert StreamTask("code", "summary", "symbol") not in plan  # one symbol query per store
    assert not any(t.stream == "symbol" and t.store != "code" for t in plan)
    assert len(plan) == 2 + 2 + 1 + 1 + 1
    no_text = plan_streams(units, every, has_text=False)
    assert not any(t.stream == "lexical" for t in no_text)
    summary_only = plan_streams({"code": ("summary",)}, every, has_text=True)
    assert StreamTask("code", "summary", "symbol") in summary_only
    vector_only = plan_streams(units, frozenset({"vector"}), has_text=True)
    assert {t.stream for t in vector_only} == {"vector"}


def test_lexical_query_text() -> None:
    assert code_tsquery("ParseConfig") == (
        "(parseconfig & parse) | (parseconfig & config) | (parse & config)"
    )
    assert code_tsquery("how does billing retry") == "(billing & retry)"
    assert code_tsquery("billing") == "billing"
    assert code_tsquery("is a") == "(is & a)"  # only stopwords: keep them
    assert code_tsquery("(*) -> ::") == "" and not has_text("(*) -> ::")
    assert has_text("x")
    assert doc_tsquery("parse_config; DROP") == (
        "(parseconfig & parse) | (parseconfig & config) | (parseconfig & drop) | "
        "(parse & config) | (parse & drop) | (config & drop)"
    )
    many = code_tsquery(" ".join(f"word{i}" for i in range(20)))
    assert many.count("&") == 45 and "word10" not in many


def test_the_default_snippet_width_comes_from_the_environment() -> None:
    wide = SearchSettings.from_env(Env({"RETRIEVAL_SNIPPET_CHARS": "600"}))
    assert build_query(wide, text="q").snippet_chars == 600
    assert build_query(wide, text="q", snippet_chars=80).snippet_chars == 80  # asked wins
    for bad in ("79", "4001", "wide"):
        with pytest.raises(ConfigError):
            SearchSettings.from_env(Env({"RETRIEVAL_SNIPPET_CHARS": bad}))


def test_build_query_defaults_and_edges() -> None:
    query = build_query(SETTINGS, text="  ParseConfig ")
    assert (query.text, query.top_k, query.snippet_chars, query.layers) == (
        "ParseConfig",
        10,
        360,
        BROAD,
    )
    assert build_query(SETTINGS, text="q", top_k=1, snippet_chars=80).top_k == 1
    assert build_query(SETTINGS, text="q", top_k=100, snippet_chars=4000).snippet_chars == 4000
    scoped = build_query(SETTINGS, text="q", repo=" Example.com/A/B ", include_graph=True)
    assert scoped.repo == "example.com/a/b" and scoped.include_graph
    jan, feb = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC)
    assert build_query(SETTINGS, text="q", since=jan, until=jan).since == jan
    assert build_query(SETTINGS, text="q", streams=["Vector"]).streams == {"vector"}
    for bad in (
        {"text": " "},
        {"text": "q", "top_k": 0},
        {"text": "q", "top_k": 101},
        {"text": "q", "snippet_chars": 79},
        {"text": "q", "snippet_chars": 4001},
        {"text": "q", "since": feb, "until": jan},
        {"text": "q", "include_graph": True},
        {"text": "q", "repo": "a/b/c", "collection": "c"},
        {"text": "q", "streams": ["bm25"]},
        {"text": "x" * 4001},
    ):
        with pytest.raises(InvalidArgument):
            build_query(SETTINGS, **bad)


def test_code_keywords_leave_signature_queries_to_their_identifiers() -> None:
    assert code_tsquery("func (s *Server) Handle") == "(server & handle)"
    assert code_tsquery("def load(self, path: str) -> dict") == "(load & path)"
    assert code_tsquery("self") == "self"  # nothing else: keep it
    assert code_tsquery("def") == "def"


def test_layer_weights_parse_and_fail_clearly() -> None:
    assert parse_layer_weights("") == {}
    assert parse_layer_weights(" ast_summary=0.8 , repo_doc=1.25,code=1") == {
        "summary": 0.8,
        "doc": 1.25,
        "body": 1.0,
    }
    assert SearchSettings.from_env(Env({})).layer_weights == {}
    chosen = SearchSettings.from_env(Env({"RETRIEVAL_LAYER_WEIGHTS": "repo_doc=0.5"}))
    assert chosen.layer_weights == {"doc": 0.5}
    for bad, says in (
        ("ast=2", "LAYER one of code, ast_summary, repo_doc"),
        ("repo_doc", "LAYER=WEIGHT"),
        ("repo_doc=lots", "is not a number"),
        ("repo_doc=0", "must be in [0.01, 100.0]"),
        ("repo_doc=101", "must be in [0.01, 100.0]"),
    ):
        with pytest.raises(ConfigError, match="RETRIEVAL_LAYER_WEIGHTS") as caught:
            SearchSettings.from_env(Env({"RETRIEVAL_LAYER_WEIGHTS": bad}))
        assert says in str(caught.value)
    assert parse_layer_weights("repo_doc=0.01,code=100") == {"doc": 0.01, "body": 100.0}


def test_retired_ranking_settings_are_refused_with_what_replaces_them() -> None:
    for name in RETIRED_SETTINGS:
        with pytest.raises(ConfigError, match=name) as caught:
            SearchSettings.from_env(Env({name: "true"}))
        assert "skip_stages" in str(caught.value)
    # At most eight settings shape the ranking; the others are per request. Every one of
    # them is read, and nothing else SearchSettings reads changes the order of a ranking.
    assert len(RANKING_SETTINGS) <= 8
    recorder = Recorder()
    SearchSettings.from_env(RecordingEnv(recorder, "retrieval"))
    read = set(recorder.reads["retrieval"])
    assert set(RANKING_SETTINGS) <= read
    others = read - set(RANKING_SETTINGS) - set(RETIRED_SETTINGS)
    assert all(
        name.startswith(("RETRIEVAL_RERANK_", "RETRIEVAL_DB_", "RETRIEVAL_STREAMS_"))
        or name in ("RETRIEVAL_TOP_K", "RETRIEVAL_SNIPPET_CHARS")
        for name in others
    ), sorted(others)


def test_document_stream_weights_come_from_the_environment_and_fail_clearly() -> None:
    default = SearchSettings.from_env(Env({})).fusion.doc_stream_weights
    assert default["prose"]["lexical"] == 0.7 and default["mixed"]["lexical"] == 0.7
    chosen = SearchSettings.from_env(
        Env({"RETRIEVAL_DOC_STREAM_WEIGHTS": "prose:lexical=1.5"})
    ).fusion.doc_stream_weights
    assert chosen == {"prose": {"lexical": 1.5}}
    for bad in ("prose:lexical=9", "poetry:lexical=1", "prose:graph=1"):
        with pytest.raises(ConfigError, match="RETRIEVAL_DOC_STREAM_WEIGHTS"):
            SearchSettings.from_env(Env({"RETRIEVAL_DOC_STREAM_WEIGHTS": bad}))


def test_class_lines_come_from_the_environment_within_their_bounds() -> None:
    def lines(value: str) -> int:
        env = Env({"RETRIEVAL_CONTAINMENT_CLASS_LINES": value})
        return SearchSettings.from_env(env).fusion.class_lines

    assert SearchSettings.from_env(Env({})).fusion.class_lines == 200
    assert lines("0") == 0 and lines("1000000") == 1_000_000
    for bad in ("-1", "1000001", "many", "1.5"):
        with pytest.raises(ConfigError, match="RETRIEVAL_CONTAINMENT_CLASS_LINES"):
            lines(bad)


def test_every_searched_unit_has_a_lexical_field() -> None:
    # A (store, unit) the streams can plan must rank by a field whose statistics
    # publication keeps; anything else is refused, not scored without statistics.
    for store in STORES:
        for unit in units_for(store, LAYERS):
            field = field_of(store, unit)
            kept = REPOSITORY_FIELDS if field.owner == "repository_id" else COLLECTION_FIELDS
            assert field in kept
    with pytest.raises(ValueError, match="repo_docs/summary"):
        field_of("repo_docs", "summary")

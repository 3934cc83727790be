"""How a query is read as a symbol name for the symbol stream's exact matches."""

from __future__ import annotations

import pytest

from cograph_api.access_rules import Viewer
from retrieval.layers import Store
from retrieval.search import search_sql
from retrieval.search.search_sql import Scope, symbol_identifier, symbol_sql


@pytest.mark.parametrize(
    ("query", "identifier"),
    [
        ("ParseConfig", "ParseConfig"),
        ("  billing.retry.Backoff ", "billing.retry.Backoff"),
        ("Server::Handle", "Server.Handle"),
        ("Greeter#greet", "Greeter.greet"),
        ("lru-cache.commonjs.LRUCache.get", "lru-cache.commonjs.LRUCache.get"),
        ("$store", "$store"),
        ("how does billing retry", None),
        ("func (s *Server) Handle", None),
        ("-flag", None),
        ("a..b", None),
    ],
)
def test_symbol_identifier(query: str, identifier: str | None) -> None:
    assert symbol_identifier(query) == identifier


def test_exact_tiers_and_name_candidates_in_the_sql() -> None:
    sql, args = symbol_sql(Scope(Viewer("alice", False)), "Color", 300)
    assert "THEN 2" in sql and "THEN 1" in sql and "ORDER BY exact DESC" in sql
    assert "OR (lower(t.name) = $6::text)" in sql
    # A dotted name admits a node by its bare name only when it names the node outright.
    dotted, _ = symbol_sql(Scope(Viewer("alice", False)), "RetryPolicy.delay", 300)
    assert "OR (lower(t.name) = $6::text AND (lower(t.name) = $5 " in dotted
    # The case-kept identifier, the lowered one, and the lowered last segment.
    assert args[-4:-1] == ["Color", "color", "color"]
    # Not an identifier: only a node named exactly that (a computed member) matches.
    _, computed = symbol_sql(Scope(Viewer("alice", False)), " Minipass.[RESUME] ", 300)
    assert computed[-4:-1] == ["Minipass.[RESUME]", "minipass.[resume]", "minipass.[resume]"]


def test_a_stream_rows_place_follows_the_stores_place_columns() -> None:
    """_hit builds a code row's place from its span's values: it must be the place the
    ORDER BY of every stream query sorts on (_PLACE_COLUMNS), in that order."""
    code = {
        "id": 7,
        "score": 0.5,
        "repository_id": 3,
        "path": "pkg/a.py",
        "start_line": 4,
        "end_line": 9,
        "kind": "function",
        "qualified_name": "pkg.a.f",
        "is_test": True,
    }
    doc = {
        "id": 8,
        "score": 0.25,
        "collection_id": 2,
        "path": "n.md",
        "start_line": 1,
        "end_line": 5,
    }
    stores: tuple[tuple[dict[str, object], Store], ...] = (
        (code, "code"),
        (doc, "md_collections"),
    )
    for row, store in stores:
        hit = search_sql._hit(row, "body", store)
        assert hit.place == tuple(row[c] for c in search_sql._PLACE_COLUMNS[store])
        assert (hit.id, hit.score, hit.store) == (row["id"], row["score"], store)
    span = search_sql._hit(code, "body", "code").span
    assert span is not None and (span.kind, span.qualified_name) == ("function", "pkg.a.f")
    # The stored test-code flag, whatever the path says.
    assert span.is_test


def test_a_query_without_letters_or_digits_matches_no_name_by_similarity() -> None:
    """pg_trgm takes no trigram from `::`; the trigram index would hand every row to the
    recheck, so the statement asks for none."""
    sql, _ = search_sql.symbol_sql(Scope(Viewer("reader", False)), "::", 100)
    assert "% $3" not in sql and "(false)" in sql
    assert search_sql.trigram_count("::") == 0
    assert search_sql.trigram_count("AsInt") == 6
    assert search_sql.trigram_count("send_signal") == 12

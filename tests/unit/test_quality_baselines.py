"""The external baselines of the unseen corpora: identifier splitting, BM25, dense, RRF."""

from __future__ import annotations

import math

import numpy as np

from bench.quality.baselines import BM25, dense_rank, rrf, tokens


def test_identifiers_split_on_case_underscores_and_digits() -> None:
    # As the service splits them (cograph_text.identifiers, tests/unit/test_text_identifiers.py).
    assert tokens("HTTPServerError") == ["http", "server", "error", "httpservererror"]
    assert tokens("parse_config2") == ["parse", "config", "2", "parse_config2"]
    assert tokens("getURL") == ["get", "url", "geturl"]


def test_tokens_keep_the_whole_compound_identifier_too() -> None:
    assert tokens("def parseConfig(path):") == ["def", "parse", "config", "parseconfig", "path"]
    assert tokens("x = 1") == ["x", "1"]


def test_bm25_ranks_the_document_with_the_rarer_term_first() -> None:
    docs = [
        ["parse", "config", "file"],
        ["read", "file"],
        ["write", "file", "file"],
    ]
    index = BM25(docs)
    assert index.rank(["parse", "file"]) == [0, 2, 1]
    assert index.rank(["nothing"]) == []
    assert index.rank(["file"], limit=1) == [2]  # more occurrences, similar lengths


def test_bm25_matches_the_okapi_formula() -> None:
    docs = [["a", "b"], ["b", "c", "c"]]
    index = BM25(docs, k1=1.2, b=0.75)
    avg = 2.5
    idf_c = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / avg)
    expected = idf_c * 2 * 2.2 / (2 + norm)
    assert math.isclose(index.scores(["c"])[1], expected)
    assert index.scores(["c"])[0] == 0.0


def test_dense_rank_is_exact_cosine_with_stable_ties() -> None:
    matrix = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32)
    assert dense_rank(np.array([1, 0], dtype=np.float32), matrix) == [0, 2, 3, 1]
    assert dense_rank(np.array([0, 1], dtype=np.float32), matrix, limit=2) == [1, 3]
    assert dense_rank(np.array([1, 0], dtype=np.float32), np.zeros((0, 2), np.float32)) == []


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    # 5: 1/61 + 1/62; 7: 1/62 + 1/61 (tie, broken by id); 9: 1/63 only.
    assert rrf([[5, 7, 9], [7, 5]]) == [5, 7, 9]
    assert rrf([[1], [2, 1]], k=60) == [1, 2]
    assert rrf([[3, 4]], limit=1) == [3]

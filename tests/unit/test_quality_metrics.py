"""Ranking metrics of the quality harness: closed forms for one answer per query."""

from __future__ import annotations

import math

import pytest

from bench.quality.metrics import approx_tokens, first_rank, ndcg, recall, reciprocal_rank, score


def test_first_rank_is_one_based_and_none_when_absent() -> None:
    assert first_rank(["a", "b", "c"], lambda x: x == "b") == 2
    assert first_rank(["a", "b", "b"], lambda x: x == "b") == 2
    assert first_rank(["a"], lambda x: x == "z") is None
    assert first_rank([], lambda x: True) is None


def test_cutoffs() -> None:
    assert reciprocal_rank(1) == 1.0
    assert reciprocal_rank(4) == 0.25
    assert reciprocal_rank(11) == 0.0
    assert reciprocal_rank(None) == 0.0
    assert recall(5, 5) == 1.0
    assert recall(6, 5) == 0.0
    assert ndcg(1) == 1.0
    assert ndcg(3) == pytest.approx(1 / math.log2(4))
    assert ndcg(10) > 0.0
    assert ndcg(11) == 0.0


def test_score_means() -> None:
    s = score([1, 2, None, 10])
    assert s.count == 4
    assert s.mrr10 == pytest.approx((1 + 0.5 + 0 + 0.1) / 4)
    assert s.recall1 == 0.25
    assert s.recall5 == 0.5
    assert s.recall10 == 0.75
    assert s.ndcg10 == pytest.approx((1 + 1 / math.log2(3) + 0 + 1 / math.log2(11)) / 4)
    assert s.as_dict()["mrr@10"] == s.mrr10


def test_empty_set_scores_zero() -> None:
    s = score([])
    assert s.count == 0
    assert s.mrr10 == 0.0


def test_tokens_are_chars_over_four() -> None:
    assert approx_tokens(600) == 150.0

"""The routing formula, by hand."""

from __future__ import annotations

import math

import pytest

from router.scoring import idf, score


def test_idf() -> None:
    assert idf(10, 0) == 0.0  # a term nobody has weighs nothing
    assert idf(10, 1) == pytest.approx(math.log(11 / 2))
    assert idf(10, 10) == 0.0  # a term everybody has tells nothing apart


def test_coverage_and_label_boost() -> None:
    # N = 9; a df 1 (idf ln 5), b df 4 (idf ln 2). Source matched a (in a label) and b.
    # coverage 1, boost 1 + 0.5 * 1/2 = 1.25 -> capped at 1.
    df = {"a": 1, "b": 4}
    assert score(["a", "b"], 9, df, {"a", "b"}, {"a"}) == 1.0
    # Only b matched: ln2 / (ln5 + ln2) = 0.30103; no label.
    assert score(["a", "b"], 9, df, {"b"}, set()) == pytest.approx(
        math.log(2) / math.log(10), abs=1e-12
    )
    # Only b, in a label: 0.30103 * 1.25 = 0.376288.
    assert score(["a", "b"], 9, df, {"b"}, {"b"}) == pytest.approx(
        math.log(2) / math.log(10) * 1.25
    )


def test_a_typo_does_not_sink_the_right_source() -> None:
    # typo has df 0: idf 0. The source matching the only real term keeps full coverage; the
    # boost denominator still counts every query term: 1 + 0.5 * 0/2.
    assert score(["billing", "bilingg"], 9, {"billing": 2}, {"billing"}, set()) == 1.0


def test_zero_denominator_scores_zero() -> None:
    # Every readable source has the term (df == N): idf 0, nothing to weigh.
    assert score(["python"], 3, {"python": 3}, {"python"}, {"python"}) == 0.0
    assert score([], 3, {}, set(), set()) == 0.0

"""Answers per token (issue 17): serialization, summaries, the ratio and the counter error."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from bench.quality.answer_tokens import (
    BASELINE,
    DEFAULT,
    SHAPES,
    WIDTHS,
    Sample,
    answer_json,
    counter_error,
    first_rank,
    quarter_chars,
    ratio,
    render,
    summarize,
)
from bench.quality.search_client import Row
from cograph_api.search_forms import dumps


def test_answers_are_written_without_spaces_keeping_non_ascii() -> None:
    assert dumps({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'


def test_answer_json_is_compact_unless_verbose() -> None:
    full = {
        "query": "q",
        "results": [
            {
                "id": "x" * 30,
                "path": "a.py",
                "start_line": 1,
                "end_line": 3,
                "kind": "function",
                "snippet": "def f(): ...",
                "score": 0.123456,
                "stores": ["vector"],
            }
        ],
        "tokens": 7,
    }
    verbose = answer_json(full, verbose=True)
    compact = answer_json(full, verbose=False)
    assert json.loads(verbose) == full
    assert json.loads(compact)["results"][0]["location"] == "a.py:1-3"
    assert len(compact) < len(verbose)


def test_summarize_counts_answers_per_thousand_tokens_and_ranks_at_the_cutoff() -> None:
    samples = [
        Sample(rank=1, results=10, tokens=500, chars=2000),
        Sample(rank=12, results=20, tokens=1000, chars=4000),  # found, but past @10
        Sample(rank=None, results=10, tokens=500, chars=2000),
    ]
    s = summarize("x", samples)
    assert s.queries == 3
    assert s.answers_found == 2
    assert s.answers_per_1k_tokens == pytest.approx(1.0)  # 2 answers / 2000 tokens
    assert s.mrr == pytest.approx(1 / 3)
    assert s.recall == pytest.approx(1 / 3)
    assert s.mean_tokens == pytest.approx(2000 / 3)
    assert s.mean_results == pytest.approx(40 / 3)


def test_summarize_of_nothing_is_zero() -> None:
    s = summarize("x", [])
    assert (s.queries, s.answers_found, s.answers_per_1k_tokens, s.mrr) == (0, 0, 0.0, 0.0)


def test_ratio_compares_answers_per_token() -> None:
    base = summarize("v", [Sample(1, 10, 4000, 0)])
    better = summarize("c", [Sample(1, 10, 1000, 0)])
    assert ratio(better, base) == pytest.approx(4.0)
    none = summarize("n", [Sample(None, 10, 1000, 0)])
    assert ratio(better, none) == math.inf
    assert ratio(none, none) == 0.0


def test_counter_error_against_the_reference_count() -> None:
    # The reference counts 1 per 2 characters; the other way 1 per 4 (half, always under).
    err = counter_error(
        "quarter", ["abcd" * 10, "", "ab" * 10], quarter_chars, lambda t: len(t) // 2
    )
    assert err.counter == "quarter" and err.texts == 2
    assert err.reference == 30 and err.counted == 15
    assert err.total_rel == pytest.approx(-0.5)
    assert err.mean_abs_rel == pytest.approx(0.5)
    assert err.under == 2
    assert quarter_chars("abcdefgh") == 2 and quarter_chars("abcdefghi") == 3


def test_first_rank_is_one_based() -> None:
    rows = [Row("r", "a.py", "a.f", 1, 2), Row("r", "b.py", "b.g", 1, 2)]
    assert first_rank(rows, lambda r: r.path == "b.py") == 2
    assert first_rank(rows, lambda r: r.path == "c.py") is None


def test_summarize_counts_answers_over_the_budget() -> None:
    samples = [Sample(1, 3, 600, 0, 480), Sample(1, 3, 400, 0, 350)]
    s = summarize("x", samples, budget=500)
    assert s.over_budget == 1
    assert s.mean_service_tokens == pytest.approx(415.0)
    assert summarize("x", samples).over_budget == 0


def test_shapes_pin_the_baseline_width_and_measure_each_width() -> None:
    by_name = {s.name: s for s in SHAPES}
    assert len(by_name) == len(SHAPES)
    baseline = by_name[BASELINE]
    assert baseline.verbose and baseline.top_k == 10 and baseline.snippet_chars == 600
    assert by_name[DEFAULT].snippet_chars is None  # the service's default width
    for width in WIDTHS:
        shape = by_name[f"{DEFAULT} snippet_chars {width}"]
        assert (shape.top_k, shape.snippet_chars, shape.verbose) == (10, width, False)


def test_render_shows_each_ratio_against_the_baseline() -> None:
    base = summarize(BASELINE, [Sample(1, 10, 4000, 0)])
    wide = summarize(DEFAULT, [Sample(1, 10, 2000, 0)])
    narrow = summarize(f"{DEFAULT} snippet_chars 300", [Sample(1, 10, 1000, 0)])
    result = {
        "queries": 1,
        "summaries": [asdict(s) for s in (base, wide, narrow)],
        "compact_vs_verbose": ratio(wide, base),
        "vs_verbose": {DEFAULT: ratio(wide, base), narrow.shape: ratio(narrow, base)},
        "counter_error": [],
    }
    text = render(result)
    assert "| 1.00x |" in text and "| 2.00x |" in text and "| 4.00x |" in text
    assert f"{DEFAULT} vs {BASELINE}: 2.00x" in text

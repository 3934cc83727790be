"""The harness's aggregation, checks and recommendation, driven by a tiny fake ranker."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bench.quality import report
from bench.quality.datasets import Answer, Query, QueryClass
from bench.quality.metrics import first_rank
from bench.quality.runner import CONFIGS, DEFAULT_CAP, DEFAULT_K, FUSED, Outcome, matcher
from bench.quality.search_client import Row
from cograph_api.limits import SNIPPET_CHARS_DEFAULT

Ranker = Callable[[Query], list[Row]]


def _query(i: int, klass: QueryClass, half: int) -> Query:
    answer = Answer("local/q/pkg", f"pkg/m{i}.py", f"pkg.m{i}.f", 1, 5)
    return Query(f"{klass}-{i:05d}", klass, "bare", "python", f"f{i}", answer, half)


def _row(i: int) -> Row:
    return Row("local/q/pkg", f"pkg/m{i}.py", f"pkg.m{i}.f", 1, 5, 400)


def fake_ranker(position: int) -> Ranker:
    """Puts the answer at `position` (1-based) among decoys; 0 leaves it out."""

    def rank(query: Query) -> list[Row]:
        i = int(query.id.rsplit("-", 1)[1])
        decoys = [_row(1000 + i * 10 + j) for j in range(10)]
        if position:
            decoys.insert(position - 1, _row(i))
        return decoys[:10]

    return rank


OTHER_K = 60 if DEFAULT_K != 60 else 10


def _outcomes(rankers: dict[str, Ranker], queries: Sequence[Query]) -> list[Outcome]:
    out = []
    for query in queries:
        outcome = Outcome(query)
        for config, ranker in rankers.items():
            outcome.ranks[config] = first_rank(ranker(query), matcher(query.answer))
        rows = rankers[FUSED](query)
        outcome.result_chars = [r.chars for r in rows]
        outcome.whole_file_chars = 4000 * len(rows)
        # The default point ranks like fused; another k always puts the answer first.
        outcome.sweep = {(DEFAULT_K, DEFAULT_CAP): outcome.ranks[FUSED], (OTHER_K, DEFAULT_CAP): 1}
        out.append(outcome)
    return out


CLASSES: list[QueryClass] = ["symbol", "semantic"] * 4
QUERIES = [_query(i, k, i % 2) for i, k in enumerate(CLASSES)]


def test_table_scores_each_config_and_class() -> None:
    rankers = {
        "vector": fake_ranker(2),
        "lexical": fake_ranker(0),
        "symbol": fake_ranker(1),
        FUSED: fake_ranker(1),
    }
    tbl = report.table(_outcomes(rankers, QUERIES), configs=list(rankers))
    assert tbl["vector"]["symbol"].mrr10 == 0.5
    assert tbl["lexical"]["overall"].recall10 == 0.0
    assert tbl[FUSED]["overall"].count == 8
    assert "docs" not in tbl[FUSED]  # no docs queries: no row
    assert report.fusion_regressions(tbl) == []


def test_fusion_regression_is_named() -> None:
    rankers = {
        "vector": fake_ranker(3),
        "lexical": fake_ranker(0),
        "symbol": fake_ranker(1),
        FUSED: fake_ranker(2),
    }
    problems = report.fusion_regressions(report.table(_outcomes(rankers, QUERIES), list(rankers)))
    assert any(p.startswith("symbol: fused MRR@10 0.500 < symbol 1.000") for p in problems)


def test_token_use_per_result_and_per_answer() -> None:
    rankers = {FUSED: fake_ranker(1)}
    use = report.token_use(_outcomes(rankers, QUERIES))["overall"]
    assert use.results == 80
    assert use.answers_found == 8
    assert use.tokens_per_result == 100.0  # 400 chars / 4
    assert use.tokens_per_answer == 1000.0
    assert use.whole_file_tokens_per_result == 1000.0


def test_sweep_and_recommendation_use_the_held_out_half() -> None:
    outcomes = _outcomes({FUSED: fake_ranker(4)}, QUERIES)
    points = report.sweep_points(outcomes)
    assert [(p.k, p.cap) for p in points] == sorted(
        [(DEFAULT_K, DEFAULT_CAP), (OTHER_K, DEFAULT_CAP)]
    )
    advice = report.recommend(points)
    assert advice["change"] is True
    assert advice["best_on_tuning_half"] == {"rrf_k": OTHER_K, "candidate_cap": DEFAULT_CAP}
    assert advice["held_out_gain"] == pytest.approx(0.75)
    # A tuning-half winner that does not carry over is not recommended.
    for o in outcomes:
        if o.query.half == 1:
            o.sweep[(OTHER_K, DEFAULT_CAP)] = None
    assert report.recommend(report.sweep_points(outcomes))["change"] is False


def test_render_json_and_plot(tmp_path: Path) -> None:
    rng = random.Random(3)
    rankers = {name: fake_ranker(rng.randrange(0, 4)) for name in CONFIGS}
    outcomes = _outcomes(rankers, QUERIES)
    tbl = report.table(outcomes)
    tokens = report.token_use(outcomes)
    points = report.sweep_points(outcomes)
    advice = report.recommend(points)
    hits = report.graph_hit_rates(outcomes)
    text = report.render(
        tbl, tokens=tokens, points=points, advice=advice, graph_hits=hits, notes=["a note"]
    )
    assert "| fused |" in text and f"{DEFAULT_K} (default)" in text and "- a note" in text
    assert "| symbol | bare | python |" in report.render_variants(report.variant_table(outcomes))
    data = report.payload(
        tbl, tokens=tokens, points=points, advice=advice, graph_hits=hits, extra={"run": {}}
    )
    report.write_json(tmp_path / "r.json", data)
    assert json.loads((tmp_path / "r.json").read_text())["metrics"][FUSED]["overall"]["count"] == 8
    report.write_plot(tmp_path / "q.png", tbl)
    assert (tmp_path / "q.png").read_bytes()[:4] == b"\x89PNG"


def test_paired_gate_ignores_a_difference_within_noise_and_flags_a_real_one() -> None:
    # Fused swaps rank 1 and 2 with vector on two queries each way (mean difference 0):
    # below on the means only by rounding, not a regression. A constant loss is flagged.
    rankers = {
        "vector": fake_ranker(1),
        "lexical": fake_ranker(0),
        "symbol": fake_ranker(0),
        FUSED: fake_ranker(1),
    }
    outcomes = _outcomes(rankers, QUERIES)
    for index, outcome in enumerate(outcomes[:4]):
        outcome.ranks[FUSED], outcome.ranks["vector"] = (2, 1) if index % 2 else (1, 2)
    tbl = report.table(outcomes, list(rankers))
    assert report.fusion_regressions(tbl, outcomes) == []
    for outcome in outcomes:
        outcome.ranks[FUSED] = 3
    tbl = report.table(outcomes, list(rankers))
    assert report.fusion_regressions(tbl, outcomes)


def test_layer_weights_are_recommended_only_when_the_held_out_half_gains() -> None:
    outcomes = _outcomes({FUSED: fake_ranker(4)}, QUERIES)
    for o in outcomes:
        # Equal weights rank like fused; down-weighting summaries puts the answer first.
        o.weight_sweep = {(1.0, 1.0): o.ranks[FUSED], (0.5, 1.0): 1, (1.0, 1.5): None}
    points = report.weight_points(outcomes)
    assert [(p.summary, p.doc) for p in points] == [(0.5, 1.0), (1.0, 1.0), (1.0, 1.5)]
    equal = next(p for p in points if (p.summary, p.doc) == (1.0, 1.0))
    assert equal.held_out.mrr10 == pytest.approx(0.25)
    advice = report.recommend_weights(points)
    assert advice["change"] is True
    assert advice["best_on_tuning_half"] == {"ast_summary": 0.5, "repo_doc": 1.0}
    assert advice["held_out_gain"] == pytest.approx(0.75)
    assert "| 1 (default) | 1 | 0.250 | 0.250 |" in report.render_weights(points, advice)
    for o in outcomes:
        if o.query.half == 1:
            o.weight_sweep[(0.5, 1.0)] = None
    assert report.recommend_weights(report.weight_points(outcomes))["change"] is False


def _with_baselines(language_of: Callable[[int], str]) -> list[Outcome]:
    """Semantic queries in two languages: fused finds each answer first, dense second on
    the tuning half and not at all on the held-out half, bm25 never."""
    queries = [
        Query(q.id, "semantic", q.variant, language_of(i), q.text, q.answer, q.half)
        for i, q in enumerate(_query(i, "semantic", i % 2) for i in range(8))
    ]
    outcomes = _outcomes({FUSED: fake_ranker(1)}, queries)
    for o in outcomes:
        o.ranks.update(
            {
                "dense": 2 if o.query.half == 0 else None,
                "bm25": None,
                "dense+bm25": 3,
                "dense+doc": 1,
            }
        )
    return outcomes


def test_baselines_join_the_table_only_when_a_run_has_them() -> None:
    plain = _outcomes({FUSED: fake_ranker(1)}, QUERIES)
    assert set(report.table(plain)) == set(CONFIGS)  # an older run: no empty baseline rows
    tbl = report.table(_with_baselines(lambda i: "python"))
    assert list(tbl)[-4:] == ["dense", "bm25", "dense+bm25", "dense+doc"]
    assert tbl["dense"]["semantic"].mrr10 == pytest.approx(0.25)
    assert tbl["dense+doc"]["semantic"].recall1 == 1.0


def test_baseline_rows_split_by_language_and_half_with_fused_minus_dense() -> None:
    outcomes = _with_baselines(lambda i: "python" if i < 4 else "javascript")
    rows = report.baseline_rows(outcomes)
    cells = [(r["language"], r["half"], r["count"]) for r in rows]
    assert cells[:3] == [("javascript", "both", 4), ("python", "both", 4), ("all", "both", 8)]
    assert ("all", "held-out", 4) in cells and ("python", "tuning", 2) in cells
    over = rows[2]
    assert over["mrr10"] == {
        "fused": 1.0,
        "dense": pytest.approx(0.25),
        "dense+doc": 1.0,
        "dense+bm25": pytest.approx(1 / 3),
        "bm25": 0.0,
    }
    assert over["fused_minus_dense"] == pytest.approx(0.75)
    assert over["fused_minus_dense_stderr"] > 0
    held = next(r for r in rows if (r["language"], r["half"]) == ("all", "held-out"))
    assert held["fused_minus_dense"] == pytest.approx(1.0)
    assert held["fused_minus_dense_stderr"] == 0.0
    line = report.fused_minus_dense_line(rows)
    assert line.startswith("fused - dense (semantic, MRR@10, 8 queries): +0.750 (2 s.e. ")
    assert line.endswith("tuning half +0.500, held-out half +1.000")
    text = report.render_baselines(rows)
    assert (
        "| semantic | **all** | both | 8 | 1.000 | 0.250 | 1.000 | 0.333 | 0.000 | +0.750" in text
    )
    assert line in text


def test_a_class_in_one_language_gets_no_row_over_languages() -> None:
    rows = report.baseline_rows(_with_baselines(lambda i: "python"))
    assert {r["language"] for r in rows} == {"python"}
    assert report.fused_minus_dense_line(rows).startswith("fused - dense (semantic, MRR@10, 8")
    assert report.baseline_rows(_outcomes({FUSED: fake_ranker(1)}, QUERIES)) == []
    assert report.render_baselines([]) == ""


def test_token_header_names_the_default_snippet_width() -> None:
    outcomes = _outcomes({name: fake_ranker(1) for name in CONFIGS}, QUERIES)
    text = report.render(
        report.table(outcomes),
        tokens=report.token_use(outcomes),
        points=[],
        advice={},
        graph_hits={},
        notes=[],
    )
    assert f"default snippets, {SNIPPET_CHARS_DEFAULT} chars" in text
    assert "600-char" not in text

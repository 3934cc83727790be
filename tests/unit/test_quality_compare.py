"""Comparing harness runs on their shared queries, per class and half."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.quality import compare


def write_run(root: Path, ranks: dict[str, int | None]) -> Path:
    queries = [
        {"id": qid, "class": qid.split("-")[0], "half": int(qid[-1]) % 2, "ranks": {"fused": r}}
        for qid, r in ranks.items()
    ]
    root.mkdir()
    (root / "queries.json").write_text(json.dumps({"queries": queries}))
    return root


def test_shared_queries_per_half_and_the_recommendation(tmp_path: Path) -> None:
    base = write_run(
        tmp_path / "base",
        {"symbol-0": 1, "symbol-1": 2, "docs-2": None, "docs-3": 4, "docs-5": 1},
    )
    # The variant finds more, and has one query the baseline lacks (left out).
    better = write_run(
        tmp_path / "better", {"symbol-0": 1, "symbol-1": 1, "docs-2": 1, "docs-3": 1, "x-7": 1}
    )
    runs = {"base": compare.load(base), "better": compare.load(better)}
    table = compare.scores(runs, "fused")
    assert table["base"][("overall", 0)] == pytest.approx((1 + 0) / 2)
    assert table["base"][("overall", 1)] == pytest.approx((0.5 + 0.25) / 2)
    assert table["better"][("docs", 1)] == 1.0
    advice = compare.recommend(table)
    assert advice["best_on_tuning_half"] == "better" and advice["change"] is True
    assert advice["held_out_gain"] == pytest.approx(1 - 0.375)
    text = compare.render(table, 4, "fused")
    assert "| base | 0.500 / 0.375 |" in text and "4 shared queries" in text


def test_a_variant_that_only_wins_the_tuning_half_is_not_recommended(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", {"symbol-0": 2, "symbol-1": 1})
    lucky = write_run(tmp_path / "lucky", {"symbol-0": 1, "symbol-1": 3})
    table = compare.scores({"base": compare.load(base), "lucky": compare.load(lucky)}, "fused")
    advice = compare.recommend(table)
    assert advice["best_on_tuning_half"] == "lucky" and advice["change"] is False

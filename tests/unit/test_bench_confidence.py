"""bench.quality.confidence: the nonsense set is fixed, and --rescore grades recorded
evidence with the service's own function."""

from __future__ import annotations

from bench.quality.confidence import nonsense_queries, regrade, render
from retrieval.search.confidence import HIGH_COSINE, MEDIUM_COSINE


def test_the_nonsense_set_is_the_same_on_every_run_and_holds_the_issues_example() -> None:
    first = nonsense_queries()
    assert first == nonsense_queries()
    assert first[0][2] == "zzqqxx nothing here"
    texts = [text for _, _, text, _ in first]
    assert len(set(texts)) == len(texts) == 120
    assert {kind for _, kind, _, _ in first} == {"letters", "invented", "off-topic"}
    assert {half for *_, half in first} == {0, 1}


def _record(kind: str, cosine: float, answer_rank: int | None, exact: bool = False) -> dict:
    record = {
        "id": kind,
        "kind": kind,
        "half": 0,
        "confidence": "stale",
        "no_good_answer": False,
        "results": [
            {"confidence": "stale", "exact": exact, "streams": [["vector", 1, cosine]]},
        ],
    }
    if kind != "letters":
        record["answer_rank"] = answer_rank
    return record


def test_rescoring_regrades_each_result_and_the_answer() -> None:
    records = [
        _record("semantic", HIGH_COSINE, 1),
        _record("semantic", MEDIUM_COSINE, 2),
        _record("symbol", 0.1, 1, exact=True),
        _record("letters", MEDIUM_COSINE - 0.01, None),
    ]
    graded = regrade(records)
    assert [r["confidence"] for r in graded] == ["high", "medium", "high", "low"]
    assert [r["no_good_answer"] for r in graded] == [False, False, False, True]
    assert graded[0]["results"][0]["confidence"] == "high"
    text = render(graded, {"plan": "small"})
    assert "precision of high 1.000 (2 of 2" in text
    assert "nonsense: 1.000 marked low (1 of 1)" in text

"""Confidence: each threshold at its edge, the answer's verdict, and both answer forms."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.proto_json import to_json
from cograph_api.search_forms import answer_form
from retrieval.search.budget import fit_answer
from retrieval.search.confidence import (
    AGREED_HIGH_COSINE,
    AGREEMENT_RANK,
    AGREEMENT_STREAMS,
    HIGH_COSINE,
    MEDIUM_COSINE,
    Evidence,
    grade,
    verdict,
)
from retrieval.search.engine import SearchHit, SearchOutcome
from retrieval.search.fusion import Provenance, StreamName
from retrieval.search.messages import hit_to_pb, outcome_to_pb

BELOW = 1e-9  # just under a threshold: thresholds are inclusive


def evidence(*, exact: bool = False, cosine: float | None = None, **ranks: int) -> Evidence:
    """Evidence with a vector stream at rank 1 when `cosine` is given, and the other
    streams at the ranks named (lexical=3, symbol=12)."""
    found: dict[StreamName, int] = {}
    scores: dict[StreamName, float] = {}
    if cosine is not None:
        found["vector"] = ranks.pop("vector", 1)
        scores["vector"] = cosine
    for name, rank in ranks.items():
        stream: StreamName = name  # type: ignore[assignment]
        found[stream] = rank
        scores[stream] = 1.0
    return Evidence(exact=exact, ranks=found, scores=scores)


def test_an_exact_name_is_high_whatever_else_says() -> None:
    assert grade(evidence(exact=True)) == "high"
    assert grade(evidence(exact=True, cosine=0.0, symbol=1)) == "high"


def test_the_cosine_alone_decides_between_its_thresholds() -> None:
    assert grade(evidence(cosine=HIGH_COSINE)) == "high"
    assert grade(evidence(cosine=HIGH_COSINE - BELOW)) == "medium"
    assert grade(evidence(cosine=MEDIUM_COSINE)) == "medium"
    assert grade(evidence(cosine=MEDIUM_COSINE - BELOW)) == "low"
    assert grade(evidence(cosine=0.0)) == "low"


def test_a_result_nothing_found_is_low() -> None:
    assert grade(Evidence(exact=False, ranks={}, scores={})) == "low"


def test_agreeing_streams_raise_a_result_at_their_edges() -> None:
    # Two streams within AGREEMENT_RANK: medium on their own, high with a good cosine.
    assert AGREEMENT_STREAMS == 2
    weak = MEDIUM_COSINE - 0.1
    assert grade(evidence(cosine=weak, lexical=AGREEMENT_RANK)) == "medium"
    assert grade(evidence(cosine=weak, lexical=AGREEMENT_RANK + 1)) == "low"
    assert grade(evidence(cosine=weak, vector=AGREEMENT_RANK + 1, lexical=1)) == "low"
    assert grade(evidence(lexical=1, symbol=AGREEMENT_RANK)) == "medium"
    assert grade(evidence(cosine=AGREED_HIGH_COSINE, lexical=AGREEMENT_RANK)) == "high"
    assert grade(evidence(cosine=AGREED_HIGH_COSINE - BELOW, lexical=1)) == "medium"
    assert grade(evidence(cosine=AGREED_HIGH_COSINE, lexical=AGREEMENT_RANK + 1)) == "medium"


def test_one_stream_but_the_vector_stream_is_not_enough() -> None:
    assert grade(evidence(lexical=1)) == "low"
    assert grade(evidence(symbol=1)) == "low"


def test_evidence_reads_provenance() -> None:
    found = Evidence.of([Provenance("vector", 4, 0.61), Provenance("lexical", 2, 7.5)], exact=False)
    assert found.ranks == {"vector": 4, "lexical": 2}
    assert found.scores == {"vector": 0.61, "lexical": 7.5}
    assert found.agreeing() == 2


def test_the_verdict_is_the_first_results_and_no_good_answer_when_all_are_low() -> None:
    assert verdict(["medium", "high"]).confidence == "medium"
    assert verdict(["low", "low", "medium"]) == replace(
        verdict(["low", "low", "medium"]), confidence="low", no_good_answer=False
    )
    assert verdict(["low", "low"]).no_good_answer is True
    assert verdict(["high"]).no_good_answer is False
    nothing = verdict([])
    assert nothing.confidence is None and nothing.no_good_answer is True


# ---- the answer as sent ----


def _hit(i: int, confidence: str) -> SearchHit:
    return SearchHit(
        id=f"code:{i}",
        layer="code",
        store="code",
        repo="r",
        collection="",
        path=f"m{i}.py",
        qualified_name=f"m{i}.f",
        kind="function",
        language="python",
        start_line=1,
        end_line=3,
        commit="c" * 40,
        snippet=f"def f{i}(): pass",
        truncated=False,
        score=1.0 / i,
        provenance=[Provenance("vector", i, 0.2)],
        vector_score=0.2,
        bm25_score=None,
        symbol_score=None,
        confidence=confidence,  # type: ignore[arg-type]
    )


def _outcome(hits: list[SearchHit], no_good_answer: bool) -> SearchOutcome:
    return SearchOutcome(
        query="zzqqxx nothing here",
        results=hits,
        streams={"vector": "ok", "lexical": "ok", "symbol": "ok"},
        confidence=hits[0].confidence if hits else None,
        no_good_answer=no_good_answer,
    )


def test_protobuf_carries_each_results_and_the_answers_confidence() -> None:
    assert hit_to_pb(_hit(1, "medium")).confidence == pb.CONFIDENCE_MEDIUM
    reply = outcome_to_pb(_outcome([_hit(1, "low"), _hit(2, "low")], True))
    assert reply.confidence == pb.CONFIDENCE_LOW and reply.no_good_answer
    empty = outcome_to_pb(_outcome([], True))
    assert empty.confidence == pb.CONFIDENCE_UNSPECIFIED and empty.no_good_answer


@pytest.mark.parametrize("verbose", [False, True])
def test_both_forms_say_no_good_answer(verbose: bool) -> None:
    reply = fit_answer(_outcome([_hit(1, "low"), _hit(2, "low")], True), None, verbose)
    body = answer_form(to_json(reply), verbose)
    assert body["confidence"] == "low" and body["no_good_answer"] is True
    assert [row["confidence"] for row in body["results"]] == ["low", "low"]


def test_the_compact_form_leaves_out_what_says_nothing() -> None:
    good = fit_answer(_outcome([_hit(1, "high")], False), None, False)
    body = answer_form(to_json(good), False)
    assert body["confidence"] == "high" and "no_good_answer" not in body
    empty = answer_form(to_json(fit_answer(_outcome([], True), None, False)), False)
    assert "confidence" not in empty and empty["no_good_answer"] is True
    verbose = answer_form(to_json(fit_answer(_outcome([], True), None, True)), True)
    assert verbose["confidence"] == "unspecified"


@pytest.mark.parametrize("verbose", [False, True])
def test_a_budget_that_holds_no_result_keeps_the_verdict(verbose: bool) -> None:
    """The verdict is on what the search found, not on what the budget let through: a
    caller told to raise max_tokens also learns whether it is worth it."""
    hits = [replace(_hit(i, "high"), snippet="x = 1\n" * 200) for i in (1, 2)]
    reply = fit_answer(_outcome(hits, False), 150, verbose)
    assert not reply.results and reply.first_result_tokens > 150
    body = answer_form(to_json(reply), verbose)
    assert body["confidence"] == "high" and not body.get("no_good_answer")

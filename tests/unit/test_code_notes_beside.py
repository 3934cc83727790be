"""Notes beside code, the pure parts: which targets an answer asks about, what a merged
range keeps, and how the notes weigh in the token budget and the compact form."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cograph_api import limits
from cograph_api.anchors import CodeTarget
from cograph_api.proto_json import to_json
from cograph_api.search_forms import compact_search, dumps
from cograph_api.tokens import default_counter
from retrieval.search.budget import apply_budget, fit_answer
from retrieval.search.code_notes import (
    COMMONS_UNAVAILABLE,
    TOO_MANY_TARGETS,
    CodeNote,
    Found,
    Targets,
    hit_target,
)
from retrieval.search.engine import SearchOutcome
from tests.unit.test_search_budget import _hit, hit_tokens, words

NOTE = CodeNote("n1", "retries must stay idempotent", 2, "fresh")
OTHER = CodeNote("n2", "the ledger is append-only", 0, "body_changed")


def test_one_node_at_two_layers_is_asked_about_once_and_refs_never() -> None:
    code, summary = _hit("a.py", 1, 5, "x"), _hit("a.py", 1, 5, "x", layer="ast_summary")
    on_ref = replace(_hit("b.py", 1, 5, "x"), repo="r@v2")
    doc = replace(_hit("README.md", 1, 5, "x"), store="repo_docs")
    targets = Targets()
    for hit in (code, summary, on_ref, doc):
        targets.add(hit_target(hit))
    assert targets.targets == [CodeTarget("r", "a.py", "m.f1", 1, 5)]
    assert targets.of_item == [0, 0, -1, -1]
    found = Found([[NOTE]])
    assert targets.notes(found) == [[NOTE], [NOTE], [], []]
    assert targets.reason(found) == ""
    assert targets.reason(Found(None, COMMONS_UNAVAILABLE)) == COMMONS_UNAVAILABLE
    assert targets.notes(Found(None, COMMONS_UNAVAILABLE)) == [[], [], [], []]


def test_targets_beyond_the_limit_carry_no_notes_and_say_so() -> None:
    targets = Targets()
    for line in range(1, limits.NOTES_TARGETS_MAX + 3):
        targets.add(CodeTarget("r", "a.py", f"f{line}", line, line))
    targets.add(CodeTarget("r", "a.py", "f1", 1, 1))  # asked about already: still answered
    assert len(targets.targets) == limits.NOTES_TARGETS_MAX
    assert targets.of_item[-3:] == [-1, -1, 0]
    assert targets.reason(Found([[] for _ in targets.targets])) == TOO_MANY_TARGETS


def test_a_merged_range_keeps_both_results_notes_once() -> None:
    first = replace(_hit("a.py", 1, 10, words(5)), notes=[NOTE])
    second = replace(_hit("a.py", 8, 20, words(5)), notes=[OTHER, NOTE])
    [merged] = apply_budget([first, second], 10_000, hit_tokens).hits
    assert (merged.start_line, merged.end_line) == (1, 20)
    assert [n.id for n in merged.notes] == ["n1", "n2"]


def test_notes_are_counted_and_shown_in_the_compact_form() -> None:
    bare = _hit("a.py", 1, 5, words(20))
    noted = replace(bare, notes=[NOTE, OTHER])
    counter = default_counter()

    def answer(hit_notes: bool, budget: int | None) -> dict[str, Any]:
        hit = noted if hit_notes else bare
        outcome = SearchOutcome(
            "q", [replace(hit)], {"vector": "ok", "lexical": "ok", "symbol": "ok"}
        )
        return compact_search(to_json(fit_answer(outcome, budget, False)))

    with_notes, without = answer(True, None), answer(False, None)
    [row] = with_notes["results"]
    assert row["notes"] == [
        {"id": "n1", "title": NOTE.title, "score": 2, "status": "fresh"},
        {"id": "n2", "title": OTHER.title, "score": 0, "status": "body_changed"},
    ]
    assert "notes" not in without["results"][0]
    assert with_notes["tokens"] > without["tokens"]
    # A budget that holds the result without its notes but not with them leaves it out.
    # (a few tokens of slack: the fit reserves the envelope at its largest).
    budget = int(without["tokens"]) + 8
    assert int(with_notes["tokens"]) > budget
    tight = answer(True, budget)
    assert tight["results"] == [] and counter(dumps(tight)) <= budget
    assert answer(False, budget)["results"]


def test_the_reason_shows_on_the_compact_answer_only_when_notes_are_missing() -> None:
    outcome = SearchOutcome("q", [], {"vector": "ok", "lexical": "ok", "symbol": "ok"})
    assert "notes_reason" not in compact_search(to_json(fit_answer(outcome, None, False)))
    outcome.notes_reason = COMMONS_UNAVAILABLE
    shown = compact_search(to_json(fit_answer(outcome, None, False)))
    assert shown["notes_reason"] == COMMONS_UNAVAILABLE

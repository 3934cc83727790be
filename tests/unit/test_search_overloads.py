"""Overloads share their summaries' evidence and are ordered by their code (overloads.py), and
the ranking plan applies both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.layers import Store
from retrieval.search.fusion import Fused, Span, StreamHit, StreamName
from retrieval.search.overloads import order_by_code, overload_key, share_summaries
from retrieval.search.pipeline import rank
from retrieval.search.ranking import FusionPlan, default_fusion, plan_fusion

FILE = "src/BooleanUtils.java"
# Three overloads of toBoolean and one other method, in one file; a namesake elsewhere.
SPANS = {
    1: Span(1, FILE, 10, 14, "method", "lang.BooleanUtils.toBoolean"),
    2: Span(1, FILE, 20, 24, "method", "lang.BooleanUtils.toBoolean#2"),
    3: Span(1, FILE, 30, 34, "method", "lang.BooleanUtils.toBoolean#3"),
    4: Span(1, FILE, 40, 44, "method", "lang.BooleanUtils.negate"),
    5: Span(1, "src/Other.java", 1, 5, "method", "lang.BooleanUtils.toBoolean"),
    6: Span(2, FILE, 20, 24, "method", "lang.BooleanUtils.toBoolean#2"),  # other repository
}


def hit(node: int, unit: str = "body", score: float = 0.5) -> StreamHit:
    return StreamHit(unit, node, score, 0, SPANS[node])  # type: ignore[arg-type]


def listed(hits: list[StreamHit]) -> list[tuple[str, int]]:
    return [(h.unit, h.id) for h in hits]


def test_the_group_is_the_file_and_the_name_without_its_repeat_number() -> None:
    assert overload_key(SPANS[1]) == overload_key(SPANS[2]) == overload_key(SPANS[3])
    assert overload_key(SPANS[1]) != overload_key(SPANS[4])
    assert overload_key(SPANS[1]) != overload_key(SPANS[5])  # another file
    assert overload_key(SPANS[2]) != overload_key(SPANS[6])  # another repository
    assert overload_key(Span(1, FILE, 1, 2)) is None  # no name: nothing to group


def test_an_overloads_summary_gives_its_place_to_the_best_ranked_body() -> None:
    # The summary of overload 2 ranks first; overload 3's body is the group's best body.
    hits = [
        hit(2, "summary", 0.9),
        hit(4, "body", 0.8),
        hit(3, "body", 0.7),
        hit(2, "body", 0.6),
        hit(1, "summary", 0.5),
    ]
    out = share_summaries(hits)
    assert listed(out) == [("body", 3), ("body", 4), ("body", 3), ("body", 2), ("body", 3)]
    assert [h.score for h in out] == [h.score for h in hits]  # places and scores kept
    assert out[0].span == SPANS[3]


def test_a_summary_stays_when_its_own_body_ranks_best_or_its_group_has_no_body() -> None:
    own = [hit(1, "body", 0.9), hit(1, "summary", 0.8), hit(2, "body", 0.7)]
    assert share_summaries(own) == own
    bodiless = [hit(2, "summary", 0.9), hit(3, "summary", 0.8), hit(4, "body", 0.7)]
    assert share_summaries(bodiless) == bodiless


def test_names_that_are_not_repeated_are_left_alone() -> None:
    # The namesake in another file and in another repository are not overloads of node 1.
    hits = [hit(5, "summary", 0.9), hit(6, "summary", 0.85), hit(1, "body", 0.8)]
    assert share_summaries(hits) == hits
    assert share_summaries([]) == []


def test_rank_shares_summaries_in_the_code_store_unless_turned_off() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(2, "summary", 0.9), hit(3, "body", 0.7), hit(2, "body", 0.6)],
    }
    lists: Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]] = {"code": streams}
    shared = rank(lists, FusionPlan(k=10, cap=300, skip=frozenset({"containment"})))
    assert (shared[0].unit, shared[0].id) == ("body", 3)
    plan = FusionPlan(k=10, cap=300, skip=frozenset({"containment", "shared_summaries"}))
    own = rank(lists, plan)
    assert (own[0].unit, own[0].id) == ("summary", 2)


def fused_item(node: int, score: float) -> Fused:
    return Fused("code", "body", node, score, span=SPANS[node])


def test_overloads_take_their_groups_places_in_the_order_their_code_ranks() -> None:
    # Fusion put toBoolean#3 first, negate second, toBoolean third and toBoolean#2 last;
    # the vector stream ranks the bodies toBoolean, toBoolean#3 (toBoolean#2 not found).
    items = [fused_item(3, 0.9), fused_item(4, 0.8), fused_item(1, 0.7), fused_item(2, 0.6)]
    vector = [hit(2, "summary", 0.95), hit(1, "body", 0.9), hit(4, "body", 0.85), hit(3)]
    out = order_by_code(items, vector)
    assert [item.id for item in out] == [1, 4, 3, 2]
    assert [item.score for item in out] == [0.9, 0.8, 0.7, 0.6]  # each place keeps its score


def test_order_by_code_leaves_lone_names_and_namesakes_elsewhere_alone() -> None:
    items = [fused_item(5, 0.9), fused_item(6, 0.8), fused_item(1, 0.7), fused_item(4, 0.6)]
    vector = [hit(1), hit(6), hit(5), hit(4)]
    assert [item.id for item in order_by_code(items, vector)] == [5, 6, 1, 4]
    assert order_by_code([], vector) == []


def test_prose_questions_order_overloads_by_code_and_code_shaped_ones_do_not() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(1, "body", 0.9), hit(2, "body", 0.8)],
        "lexical": [hit(2, "body", 9.0), hit(1, "body", 8.0)],
        "symbol": [hit(2, "body", 0.7)],
    }
    lists: Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]] = {"code": streams}
    fused = rank(lists, FusionPlan(k=10, cap=300, skip=frozenset({"containment"})))
    assert [item.id for item in fused] == [2, 1]  # two streams of three put #2 first
    settings = default_fusion()
    prose = plan_fusion("convert an integer to a boolean", 10, 300, settings)
    assert prose.order_overloads_by_code
    assert [item.id for item in rank(lists, prose)] == [1, 2]
    assert rank(lists, prose)[0].score > rank(lists, prose)[1].score
    for code_shaped in ("BooleanUtils.toBoolean", "toBoolean(int value)"):
        assert not plan_fusion(code_shaped, 10, 300, settings).order_overloads_by_code
    off = plan_fusion(
        "convert an integer to a boolean", 10, 300, settings, skip=frozenset({"overload_order"})
    )
    assert [item.id for item in rank(lists, off)] == [2, 1]

"""Containment and layer folding (containment.py), weighted RRF, and the ranking plan."""

from __future__ import annotations

import pytest

from retrieval.layers import Store
from retrieval.search.containment import collapse
from retrieval.search.fusion import Fused, Span, StreamHit, StreamName, fuse
from retrieval.search.pipeline import rank
from retrieval.search.ranking import (
    FusionPlan,
    FusionSettings,
    parse_stream_weights,
    plan_fusion,
)

K = 10
FILE = "pkg/mod.py"
# A module (lines 1-40) holding a class (10-30) with two methods, and a function.
SPANS = {
    1: Span(7, FILE, 1, 40),  # module
    2: Span(7, FILE, 10, 30),  # class
    3: Span(7, FILE, 12, 18),  # method a
    4: Span(7, FILE, 20, 28),  # method b
    5: Span(7, FILE, 32, 40),  # function
    6: Span(7, "pkg/other.py", 1, 5),  # another file
    7: Span(8, FILE, 10, 30),  # the same lines in another repository
}


def hit(node: int, unit: str = "body", exact: int = 0) -> StreamHit:
    return StreamHit(unit, node, 1.0, exact, SPANS[node])  # type: ignore[arg-type]


def fused(streams: dict[StreamName, list[StreamHit]]) -> list[Fused]:
    return fuse(streams, K, 300)


def ids(items: list[Fused]) -> list[tuple[str, int]]:
    return [(item.unit, item.id) for item in items]


def ranks(item: Fused) -> dict[str, int]:
    return {p.stream: p.rank for p in item.provenance}


def test_span_covers_only_in_the_same_file_and_repository() -> None:
    assert SPANS[1].covers(SPANS[3]) and SPANS[2].covers(SPANS[4])
    assert not SPANS[3].covers(SPANS[1])
    assert not SPANS[1].covers(SPANS[6])  # another file
    assert not SPANS[7].covers(SPANS[3])  # another repository
    assert not SPANS[2].covers(Span(7, FILE, 10, 30))  # the same range, kinds unknown
    # A module that is exactly one function (no imports) contains it; not the reverse.
    module, function = Span(7, FILE, 1, 9, "module"), Span(7, FILE, 1, 9, "function")
    assert module.covers(function) and not function.covers(module)
    assert Span(7, FILE, 1, 9, "class").covers(Span(7, FILE, 1, 9, "method"))


def test_a_module_folds_into_its_member_which_takes_its_place() -> None:
    out = collapse(fused({"vector": [hit(1), hit(6), hit(5)]}), K)
    assert ids(out) == [("body", 5), ("body", 6)]
    member = out[0]
    # The member takes the module's place and provenance (vector 1): score 1/11.
    assert ranks(member) == {"vector": 1}
    assert member.score == pytest.approx(1 / 11)


def test_a_folded_row_keeps_its_place_for_ties() -> None:
    """A tie between a folded row and another falls through to where each lies, as for
    every fused row, not to the row ids."""

    def placed(node: int, span: Span) -> StreamHit:
        return StreamHit("body", node, 1.0, 0, span, "code", (span.repository_id, span.path))

    module, member = Span(7, "z.py", 1, 40, "module"), Span(7, "z.py", 32, 40, "function")
    other = Span(7, "a.py", 1, 5, "function")
    # The module (vector 1) folds into its member (id 3); the other row (lexical 1) scores
    # the same, has a larger id and lies in a path that sorts first.
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [placed(1, module), placed(3, member)],
        "lexical": [placed(9, other)],
    }
    out = collapse(fused(streams), K)
    assert out[0].score == out[1].score
    assert ids(out) == [("body", 9), ("body", 3)]
    assert out[1].place == (7, "z.py")


def test_the_fold_scores_the_best_of_the_group_not_a_sum() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(1), hit(5)],
        "lexical": [hit(5)],
    }
    out = collapse(fused(streams), K)
    assert ids(out) == [("body", 5)]
    assert ranks(out[0]) == {"vector": 2, "lexical": 1}  # the member's own, the best
    assert out[0].score == pytest.approx(1 / 12 + 1 / 11)
    union = collapse(fused(streams), K, fold="union")
    assert ranks(union[0]) == {"vector": 1, "lexical": 1}  # best rank per stream
    assert union[0].score == pytest.approx(1 / 11 + 1 / 11)


def test_a_module_named_like_its_function_gives_way_to_it() -> None:
    module = StreamHit("body", 1, 1.0, 2, Span(7, FILE, 1, 40, "module"))
    out = collapse(fused({"symbol": [module, hit(5, exact=2)]}), K)
    assert ids(out) == [("body", 5)]


def test_a_container_goes_to_its_best_ranked_member_only() -> None:
    out = collapse(fused({"vector": [hit(2), hit(4), hit(3)]}), K)
    assert ids(out) == [("body", 4), ("body", 3)]
    assert ranks(out[0]) == {"vector": 1} and ranks(out[1]) == {"vector": 3}
    # better: the class (ranked first) stays and takes both methods.
    better = collapse(fused({"vector": [hit(2), hit(4), hit(3)]}), K, prefer="better")
    assert ids(better) == [("body", 2)]


def test_nested_containers_fold_into_the_innermost_member() -> None:
    out = collapse(fused({"vector": [hit(1), hit(2), hit(3)], "lexical": [hit(2)]}), K)
    assert ids(out) == [("body", 3)]
    assert ranks(out[0]) == {"vector": 2, "lexical": 1}  # the class's: the group's best


def test_a_container_without_candidate_members_stays() -> None:
    out = collapse(fused({"vector": [hit(2), hit(5), hit(6)]}), K)
    assert ids(out) == [("body", 2), ("body", 5), ("body", 6)]


def test_a_module_with_a_member_class_folds_into_the_class() -> None:
    out = collapse(fused({"vector": [hit(1), hit(6), hit(2)]}), K)
    assert ids(out) == [("body", 2), ("body", 6)]


def test_layers_of_one_node_are_one_row_the_better_kept() -> None:
    out = collapse(fused({"vector": [hit(3, "summary"), hit(6), hit(3)], "lexical": [hit(3)]}), K)
    assert ids(out) == [("body", 3), ("body", 6)]  # body: vector 3 + lexical 1 beats 1 alone
    assert ranks(out[0]) == {"vector": 3, "lexical": 1}


def test_layer_weights_decide_which_unit_stays() -> None:
    streams: dict[StreamName, list[StreamHit]] = {"vector": [hit(3), hit(3, "summary")]}
    assert ids(collapse(fused(streams), K)) == [("body", 3)]
    weighted = collapse(fused(streams), K, unit_weights={"body": 0.5})
    assert ids(weighted) == [("summary", 3)]


def test_a_named_container_stays_and_takes_its_members() -> None:
    # The query names the class: it stays whatever its members scored.
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(3), hit(4), hit(1)],
        "symbol": [hit(2, exact=2)],
    }
    out = collapse(fused(streams), K)
    assert ids(out) == [("body", 2)]
    # Its own score ties its best member's (both first in one stream): its own stays.
    assert out[0].exact == 2 and ranks(out[0]) == {"symbol": 1}


def test_a_named_member_stays_and_takes_its_containers() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(1), hit(2), hit(5)],
        "symbol": [hit(3, exact=2)],
    }
    out = collapse(fused(streams), K)
    assert ids(out) == [("body", 3), ("body", 5)]
    assert out[0].exact == 2


def test_a_named_node_stays_when_its_summary_outscores_the_named_body() -> None:
    # The symbol stream names the class body; its summary unit scores better, and its
    # method better still. The class is still the named node: the method folds into it,
    # not it into the method.
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(3), hit(2, "summary"), hit(4)],
        "lexical": [hit(3), hit(2, "summary")],
        "symbol": [hit(2, exact=3)],
    }
    out = collapse(fused(streams), K, prefer="better")
    assert ids(out) == [("summary", 2)] and out[0].exact == 3


def test_named_equally_the_container_stays() -> None:
    # `Range` names the class and its constructor alike.
    streams: dict[StreamName, list[StreamHit]] = {"symbol": [hit(3, exact=2), hit(2, exact=2)]}
    assert ids(collapse(fused(streams), K)) == [("body", 2)]


def test_a_member_named_in_case_beats_a_container_named_ignoring_case() -> None:
    streams: dict[StreamName, list[StreamHit]] = {"symbol": [hit(3, exact=2), hit(2, exact=1)]}
    assert ids(collapse(fused(streams), K)) == [("body", 3)]


def test_rows_without_spans_pass_through() -> None:
    plain = [StreamHit("body", 9, 1.0), StreamHit("body", 8, 0.9)]
    out = collapse(fused({"vector": plain}), K)
    assert ids(out) == [("body", 9), ("body", 8)]


def test_no_result_contains_another_after_collapse() -> None:
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [hit(n) for n in (1, 2, 3, 4, 5, 6, 7)],
        "lexical": [hit(n) for n in (7, 5, 1, 3)],
    }
    out = collapse(fused(streams), K)
    spans = [item.span for item in out]
    assert all(not a.covers(b) for a in spans for b in spans if a and b)
    assert {item.id for item in out} == {3, 4, 5, 6, 7}


def test_weighted_rrf_scales_each_streams_contribution() -> None:
    streams: dict[StreamName, list[StreamHit]] = {"vector": [hit(5)], "lexical": [hit(6), hit(5)]}
    plain = {f.id: f.score for f in fuse(streams, K, 300)}
    assert plain[5] == pytest.approx(1 / 11 + 1 / 12)
    weighted = fuse(streams, K, 300, {"vector": 2.0, "lexical": 0.5})
    scores = {f.id: f.score for f in weighted}
    assert scores[5] == pytest.approx(2 / 11 + 0.5 / 12) and scores[6] == pytest.approx(0.5 / 11)
    # weight 1 everywhere is plain RRF, bit for bit
    same = fuse(streams, K, 300, {"vector": 1.0, "lexical": 1.0})
    assert [f.score for f in same] == [f.score for f in fuse(streams, K, 300)]


def test_document_rows_fuse_with_their_own_weights_when_streams_are_fused() -> None:
    # A code row and a document row, each first in one stream: the document's lexical
    # rank weighs 0.7 against the code's 0.35, the vector ranks 1 for both.
    code = StreamHit("body", 1, 0.9, 0, SPANS[5])
    doc = StreamHit("doc", 1, 0.8, 0, None, "repo_docs")
    streams: dict[StreamName, list[StreamHit]] = {"vector": [code, doc], "lexical": [doc, code]}
    code_w: dict[StreamName, float] = {"lexical": 0.35}
    doc_w: dict[StreamName, float] = {"lexical": 0.7}
    out = {f.store: f.score for f in fuse(streams, K, 300, code_w, doc_w)}
    assert out["code"] == pytest.approx(1 / 11 + 0.35 / 12)
    assert out["repo_docs"] == pytest.approx(1 / 12 + 0.7 / 11)
    assert [f.store for f in fuse(streams, K, 300, code_w, doc_w)] == ["repo_docs", "code"]
    assert [f.store for f in fuse(streams, K, 300, code_w)] == ["code", "repo_docs"]
    # A stream alone keeps its own order across stores, whatever the weights.
    alone: dict[StreamName, list[StreamHit]] = {"lexical": [code, doc]}
    assert [f.store for f in fuse(alone, K, 300, {"lexical": 0.35}, {"lexical": 5.0})] == [
        "code",
        "repo_docs",
    ]


def test_the_plan_takes_document_weights_by_query_class() -> None:
    settings = FusionSettings(
        stream_weights=parse_stream_weights("prose:lexical=0.35"),
        doc_stream_weights=parse_stream_weights("prose:lexical=0.7"),
    )
    assert plan_fusion("how are timers refreshed", K, 300, settings).doc_stream_weights == {
        "lexical": 0.7
    }
    # A class the document weights do not name: documents weigh as code does.
    assert plan_fusion("ParseConfig", K, 300, settings).doc_stream_weights is None


def test_parse_stream_weights() -> None:
    assert parse_stream_weights("") == {}
    assert parse_stream_weights(" prose: vector=1.5, lexical=0.5 ; mixed:symbol=0") == {
        "prose": {"vector": 1.5, "lexical": 0.5},
        "mixed": {"symbol": 0.0},
    }
    for bad in ("poetry:vector=1", "prose:graph=1", "prose:vector=x", "prose:vector=9", "prose"):
        with pytest.raises(ValueError):
            parse_stream_weights(bad)


def test_rank_weighs_test_code_down() -> None:
    # Test code is what the indexer stored as such (Span.is_test), whatever the path says.
    code = [
        StreamHit("body", 1, 1.0, 0, Span(1, "tests/test_a.py", 1, 5, is_test=True)),
        StreamHit("body", 2, 0.9, 0, Span(1, "src/a.py", 1, 5)),
    ]
    docs = [StreamHit("doc", 3, 1.0, store="repo_docs")]
    lists: dict[Store, dict[StreamName, list[StreamHit]]] = {
        "code": {"vector": code},
        "repo_docs": {"vector": docs},
    }
    settings = FusionSettings(test_weight=0.5)
    prose = plan_fusion("how are retries spaced out", K, 300, settings)
    # The test row (first in its stream) is halved below the second code row.
    assert [(i.store, i.id) for i in rank(lists, prose)] == [
        ("repo_docs", 3),
        ("code", 2),
        ("code", 1),
    ]
    unweighed = plan_fusion(
        "how are retries spaced out", K, 300, settings, skip=frozenset({"test_code"})
    )
    assert [(i.store, i.id) for i in rank(lists, unweighed)][:2] == [("code", 1), ("repo_docs", 3)]


def test_rank_weighs_what_is_stored_as_test_code_not_what_the_path_says() -> None:
    code = [
        StreamHit("body", 1, 1.0, 0, Span(1, "src/a.py", 1, 5, is_test=True)),
        StreamHit("body", 2, 0.9, 0, Span(1, "tests/test_b.py", 1, 5)),
    ]
    plan = FusionPlan(K, 300, test_weight=0.5)
    assert [i.id for i in rank({"code": {"vector": code}}, plan)] == [2, 1]


def test_rank_joins_the_stores_of_a_stream_on_raw_score() -> None:
    # Two code rows well above a weak document: joined on the raw score, the document ranks
    # third (fused per store, its first place would be worth the code's first place).
    lists: dict[Store, dict[StreamName, list[StreamHit]]] = {
        "code": {
            "vector": [
                StreamHit("body", 1, 0.9, 0, Span(1, "src/a.py", 1, 5)),
                StreamHit("body", 2, 0.85, 0, Span(1, "src/b.py", 1, 5)),
            ]
        },
        "repo_docs": {"vector": [StreamHit("doc", 3, 0.5, store="repo_docs")]},
    }
    joint = FusionPlan(K, 300, skip=frozenset({"containment"}))
    assert [(i.store, i.id) for i in rank(lists, joint)] == [
        ("code", 1),
        ("code", 2),
        ("repo_docs", 3),
    ]


def test_a_function_ranked_above_its_nested_function_keeps_it_under_a_member_ratio() -> None:
    # `exclude` (lines 1-20) defines the closure `exclude_` (5-15). Ranked first, the
    # function stays under a member ratio and the closure folds into it; `member` still
    # returns the closure. Ranked below its closure, the function gives way as before (a
    # factory's inner functions can be its API). A class still gives way to its method.
    outer = Span(1, "attr/filters.py", 1, 20, "function", "attr.filters.exclude")
    inner = Span(1, "attr/filters.py", 5, 15, "function", "attr.filters.exclude.exclude_")
    first: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 1, 0.9, 0, outer), StreamHit("body", 2, 0.85, 0, inner)]
    }
    items = fuse(first, K, 300)
    assert ids(collapse(items, K, prefer=0.5)) == [("body", 1)]
    assert ids(collapse(items, K, prefer="member")) == [("body", 2)]
    second: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 2, 0.9, 0, inner), StreamHit("body", 1, 0.85, 0, outer)]
    }
    kept = collapse(fuse(second, K, 300), K, prefer=0.5)
    assert ids(kept) == [("body", 2)] and ranks(kept[0]) == {"vector": 1}
    cls = Span(1, "attr/filters.py", 1, 20, "class", "attr.filters.Exclude")
    method = Span(1, "attr/filters.py", 5, 15, "method", "attr.filters.Exclude.check")
    third: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 1, 0.9, 0, cls), StreamHit("body", 2, 0.85, 0, method)]
    }
    assert ids(collapse(fuse(third, K, 300), K, prefer=0.5)) == [("body", 2)]


def _class_case(
    class_lines: int, member: str, class_cosine: float, member_cosine: float, end: int = 40
) -> list[tuple[str, int]]:
    """A class ranked first by the lexical stream, above one of its members that scores
    more than half as well (the ratio would fold the class into it), collapsed under the
    member ratio 0.5 with the given `class_lines`."""
    cls = Span(1, "timers.js", 1, end, "class", "lib.timers.FastTimer")
    inner = Span(1, "timers.js", 5, 15, "method", f"lib.timers.FastTimer.{member}")
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": sorted(
            [
                StreamHit("body", 1, class_cosine, 0, cls),
                StreamHit("body", 2, member_cosine, 0, inner),
            ],
            key=lambda h: -h.score,
        ),
        "lexical": [StreamHit("body", 1, 3.0, 0, cls), StreamHit("body", 2, 2.0, 0, inner)],
    }
    return ids(collapse(fuse(streams, K, 300), K, prefer=0.5, class_lines=class_lines))


def test_a_small_class_matched_by_its_own_vector_stays_above_its_member() -> None:
    # The class's cosine is at least its member's: under `class_lines` it stays and takes
    # the member; without the rule (0) or when larger than the limit it gives way.
    assert _class_case(200, "refresh", 0.62, 0.55) == [("body", 1)]
    assert _class_case(200, "refresh", 0.62, 0.62) == [("body", 1)]  # a tie counts
    assert _class_case(0, "refresh", 0.62, 0.55) == [("body", 2)]
    assert _class_case(200, "refresh", 0.62, 0.55, end=201) == [("body", 2)]
    assert _class_case(200, "refresh", 0.62, 0.55, end=200) == [("body", 1)]  # 200 lines
    # The member's own vector matched better: the most specific node stays.
    assert _class_case(200, "refresh", 0.55, 0.62) == [("body", 2)]


@pytest.mark.parametrize("constructor", ["constructor", "__init__", "FastTimer", "FastTimer#2"])
def test_a_small_class_keeps_its_constructor_whatever_the_cosines(constructor: str) -> None:
    # A constructor restates its class; JavaScript's, Python's and Java's (named like the
    # class, overloads marked #N) are recognised.
    assert _class_case(200, constructor, 0.55, 0.62) == [("body", 1)]
    assert _class_case(0, constructor, 0.55, 0.62) == [("body", 2)]
    assert _class_case(200, "construct", 0.55, 0.62) == [("body", 2)]


def test_the_small_class_rule_leaves_other_containers_and_orders_alone() -> None:
    # A module, an impl block or a function never stays by it; a class ranked below its
    # member gives way as before; `member` and `better` are not changed by it.
    for kind in ("module", "impl"):
        outer = Span(1, "a.rs", 1, 40, kind, "a.Thing")
        inner = Span(1, "a.rs", 5, 15, "method", "a.Thing.new")
        streams: dict[StreamName, list[StreamHit]] = {
            "vector": [StreamHit("body", 1, 0.9, 0, outer), StreamHit("body", 2, 0.5, 0, inner)]
        }
        assert ids(collapse(fuse(streams, K, 300), K, prefer=0.5, class_lines=200)) == [("body", 2)]
    cls = Span(1, "timers.js", 1, 40, "class", "lib.timers.FastTimer")
    inner = Span(1, "timers.js", 5, 15, "method", "lib.timers.FastTimer.constructor")
    # The member first in the only stream: the class folds into it, constructor or not.
    below: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 2, 0.9, 0, inner), StreamHit("body", 1, 0.95, 0, cls)]
    }
    assert ids(collapse(fuse(below, K, 300), K, prefer=0.5, class_lines=200)) == [("body", 2)]
    first: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 1, 0.9, 0, cls), StreamHit("body", 2, 0.5, 0, inner)]
    }
    assert ids(collapse(fuse(first, K, 300), K, prefer="member", class_lines=200)) == [("body", 2)]
    assert ids(collapse(fuse(first, K, 300), K, prefer="better", class_lines=200)) == [("body", 1)]


def test_the_plan_carries_the_class_lines_setting() -> None:
    settings = FusionSettings(containment="adaptive", class_lines=120)
    assert plan_fusion("how are timers refreshed", K, 300, settings).class_lines == 120


# A 400-line class (too large for the small-class rule) and one of its methods.
MOCK_POOL = Span(1, "mock.js", 1, 400, "class", "lib.mock.MockPool")
MOCK_POOL_INTERCEPT = Span(1, "mock.js", 5, 15, "method", "lib.mock.MockPool.intercept")


def test_a_class_the_question_calls_a_type_stays_wherever_it_ranks() -> None:
    # "The MockPool class ...": the class stays and takes its member even when the member
    # ranks above it and scores far better; without the name it folds into the member.
    cls, member = MOCK_POOL, MOCK_POOL_INTERCEPT
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 2, 0.9, 0, member), StreamHit("body", 1, 0.5, 0, cls)],
        "lexical": [StreamHit("body", 2, 3.0, 0, member)],
    }
    items = fuse(streams, K, 300)
    named = collapse(items, K, prefer=0.5, type_names=frozenset({"MockPool"}))
    assert ids(named) == [("body", 1)]
    # It takes the member's place (the best of its group) and provenance.
    assert ranks(named[0]) == {"vector": 1, "lexical": 1}
    assert ids(collapse(items, K, prefer=0.5)) == [("body", 2)]
    assert ids(collapse(items, K, prefer=0.5, type_names=frozenset({"mockpool"}))) == [
        ("body", 2)
    ]  # names are matched as written


def test_a_type_name_does_not_outrank_an_exact_name_or_name_a_function() -> None:
    cls, member = MOCK_POOL, MOCK_POOL_INTERCEPT
    # The symbol stream names the member outright: the exact name wins.
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 1, 0.9, 0, cls), StreamHit("body", 2, 0.5, 0, member)],
        "symbol": [StreamHit("body", 2, 1.0, 1, member)],
    }
    out = collapse(fuse(streams, K, 300), K, prefer=0.5, type_names=frozenset({"MockPool"}))
    assert ids(out) == [("body", 2)]
    # A function or module called by that name is not a class: the ratio decides.
    for kind in ("function", "module"):
        outer = Span(1, "mock.js", 1, 400, kind, "lib.mock.MockPool")
        plain: dict[StreamName, list[StreamHit]] = {
            "vector": [StreamHit("body", 2, 0.9, 0, member), StreamHit("body", 1, 0.5, 0, outer)]
        }
        kept = collapse(fuse(plain, K, 300), K, prefer=0.5, type_names=frozenset({"MockPool"}))
        assert ids(kept) == [("body", 2)]


def test_the_plan_reads_type_names_only_under_the_member_ratio() -> None:
    settings = FusionSettings(containment="adaptive")
    prose = plan_fusion("The FastTimer class stores timers", K, 300, settings)
    assert "FastTimer" in prose.type_names
    assert plan_fusion("class FastTimer:", K, 300, settings).type_names == frozenset()
    fixed = FusionSettings(containment="member")
    assert plan_fusion("The FastTimer class stores timers", K, 300, fixed).type_names == (
        frozenset()
    )


def _opened_with(lines: int, class_lines: int, subject: frozenset[str]) -> list[tuple[str, int]]:
    # "MockPool provides an API ...": the class (of `lines` lines) ranks below its method
    # in both streams, the method's vector far better.
    cls = Span(1, "mock.js", 1, lines, "class", "lib.mock.MockPool")
    member = Span(1, "mock.js", 5, 15, "method", "lib.mock.MockPool.intercept")
    streams: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 2, 0.9, 0, member), StreamHit("body", 1, 0.5, 0, cls)],
        "lexical": [StreamHit("body", 2, 3.0, 0, member), StreamHit("body", 1, 2.0, 0, cls)],
    }
    items = fuse(streams, K, 300)
    return ids(collapse(items, K, prefer=0.5, class_lines=class_lines, subject_names=subject))


def test_a_small_class_the_question_opens_with_stays_wherever_it_ranks() -> None:
    subject = frozenset({"MockPool"})
    assert _opened_with(36, 200, subject) == [("body", 1)]
    assert _opened_with(200, 200, subject) == [("body", 1)]  # the size limit is inclusive
    # A larger class is a namespace the sentence places its member in; so is any class
    # when the small-class rule is off (0); and nothing changes without the name.
    assert _opened_with(201, 200, subject) == [("body", 2)]
    assert _opened_with(36, 0, subject) == [("body", 2)]
    assert _opened_with(36, 200, frozenset()) == [("body", 2)]
    assert _opened_with(36, 200, frozenset({"mockPool"})) == [("body", 2)]  # as written


def test_an_opening_name_never_keeps_a_function_or_beats_an_exact_name() -> None:
    subject = frozenset({"MockPool"})
    member = MOCK_POOL_INTERCEPT
    for kind in ("function", "module", "impl"):
        outer = Span(1, "mock.js", 1, 40, kind, "lib.mock.MockPool")
        plain: dict[StreamName, list[StreamHit]] = {
            "vector": [StreamHit("body", 2, 0.9, 0, member), StreamHit("body", 1, 0.5, 0, outer)]
        }
        kept = collapse(fuse(plain, K, 300), K, prefer=0.5, class_lines=200, subject_names=subject)
        assert ids(kept) == [("body", 2)]
    cls = Span(1, "mock.js", 1, 40, "class", "lib.mock.MockPool")
    named: dict[StreamName, list[StreamHit]] = {
        "vector": [StreamHit("body", 1, 0.9, 0, cls), StreamHit("body", 2, 0.5, 0, member)],
        "symbol": [StreamHit("body", 2, 1.0, 1, member)],
    }
    out = collapse(fuse(named, K, 300), K, prefer=0.5, class_lines=200, subject_names=subject)
    assert ids(out) == [("body", 2)]


def test_the_plan_reads_the_opening_name_only_under_the_member_ratio() -> None:
    settings = FusionSettings(containment="adaptive")
    prose = plan_fusion("MockPool provides an API that extends the Pool", K, 300, settings)
    assert prose.subject_names == frozenset({"MockPool"})
    assert plan_fusion("MockPool", K, 300, settings).subject_names == frozenset()
    fixed = FusionSettings(containment="member")
    assert plan_fusion("MockPool provides an API", K, 300, fixed).subject_names == frozenset()

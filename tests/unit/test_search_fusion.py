"""RRF arithmetic, caps, provenance, tie order, and the pin and layer weight stages."""

from __future__ import annotations

import random

import pytest

from retrieval.layers import Store
from retrieval.search.fusion import (
    Fused,
    StreamHit,
    StreamName,
    fuse,
    merge_lists,
    score_order,
)
from retrieval.search.pipeline import rank
from retrieval.search.ranking import FusionPlan

Streams = dict[StreamName, list[StreamHit]]


def hits(*ids: int, unit: str = "body", start: float = 1.0, store: str = "code") -> list[StreamHit]:
    return [
        StreamHit(unit, i, start - n * 0.01, store=store)  # type: ignore[arg-type]
        for n, i in enumerate(ids)
    ]


def test_scores_are_reciprocal_rank_sums() -> None:
    fused = fuse({"vector": hits(1, 2, 3), "lexical": hits(3, 1), "symbol": hits(3)}, k=60, cap=300)
    by_id = {f.id: f for f in fused}
    assert by_id[1].score == pytest.approx(1 / 61 + 1 / 62)
    assert by_id[2].score == pytest.approx(1 / 62)
    assert by_id[3].score == pytest.approx(1 / 63 + 1 / 61 + 1 / 61)
    assert [f.id for f in fused] == [3, 1, 2]
    assert [(p.stream, p.rank) for p in by_id[3].provenance] == [
        ("vector", 3),
        ("lexical", 1),
        ("symbol", 1),
    ]
    assert by_id[3].raw("vector") == pytest.approx(0.98)
    assert by_id[2].raw("lexical") is None and by_id[2].streams == {"vector"}


def test_k_changes_the_balance() -> None:
    # A is first in one stream; B is fourth in two. Low k favours the single top hit.
    streams: Streams = {"vector": hits(1, 10, 11, 2), "lexical": hits(12, 13, 14, 2)}
    low = {f.id: f.score for f in fuse(streams, k=1, cap=10)}
    assert low[1] == pytest.approx(1 / 2) and low[2] == pytest.approx(2 / 5)
    assert fuse(streams, k=1, cap=10)[0].id == 1
    high = fuse(streams, k=60, cap=10)
    assert high[0].id == 2 and high[0].score == pytest.approx(2 / 64)


def test_each_stream_is_truncated_to_the_cap_before_fusion() -> None:
    fused = fuse({"vector": hits(1, 2, 3, 4), "lexical": hits(4)}, k=60, cap=2)
    ids = {f.id: f for f in fused}
    assert set(ids) == {1, 2, 4}
    assert [p.stream for p in ids[4].provenance] == ["lexical"]  # rank 4 in vector was cut


def test_duplicates_keep_their_best_rank() -> None:
    fused = fuse({"vector": hits(5, 5, 6)}, k=60, cap=10)
    assert [(f.id, f.provenance[0].rank) for f in fused] == [(5, 1), (6, 2)]


def test_ties_break_on_chunk_id_then_unit_whatever_the_input_order() -> None:
    # 7 and 3 swap ranks across two streams: exactly equal sums, so the lower id wins.
    streams: Streams = {"vector": hits(7, 3), "lexical": hits(3, 7)}
    fused = fuse(streams, k=60, cap=10)
    assert [f.id for f in fused] == [3, 7]
    assert fused[0].score == fused[1].score
    # Three streams with permuted ranks: still bit-equal (fsum), still id order.
    streams3: Streams = {"vector": hits(9, 4, 2), "lexical": hits(4, 2, 9), "symbol": hits(2, 9, 4)}
    assert [f.id for f in fuse(streams3, k=60, cap=10)] == [2, 4, 9]
    # Same id in two units (body and summary) tie on id, body first.
    both: Streams = {
        "vector": [StreamHit("summary", 1, 0.9), StreamHit("body", 2, 0.8)],
        "lexical": [StreamHit("body", 2, 0.5), StreamHit("summary", 1, 0.4)],
    }
    assert [(f.id, f.unit) for f in fuse(both, k=60, cap=10)] == [
        (1, "summary"),
        (2, "body"),
    ]


def test_ties_break_on_place_before_row_id() -> None:
    """Where a row lies decides a tie before its id (ids follow an index run's write
    order): the same two rows under swapped ids fuse and merge in the same order."""
    a, b = (1, "pkg/a.py", 3, 9, "pkg.a.f"), (1, "pkg/b.py", 3, 9, "pkg.b.f")
    for id_a, id_b in ((1, 2), (2, 1)):
        streams: Streams = {
            "vector": [
                StreamHit("body", id_b, 0.5, place=b),
                StreamHit("body", id_a, 0.4, place=a),
            ],
            "lexical": [
                StreamHit("body", id_a, 7.0, place=a),
                StreamHit("body", id_b, 6.0, place=b),
            ],
        }
        fused = fuse(streams, k=60, cap=10)
        assert [f.place for f in fused] == [a, b]
        assert fused[0].score == fused[1].score
        merged = merge_lists(
            [[StreamHit("body", id_b, 0.5, place=b)], [StreamHit("summary", id_a, 0.5, place=a)]]
        )
        assert [h.place for h in merged] == [a, b]


def test_deterministic_under_shuffled_stream_dict_order() -> None:
    rng = random.Random(3)
    streams: Streams = {
        "vector": hits(*rng.sample(range(100), 50)),
        "lexical": hits(*rng.sample(range(100), 50)),
        "symbol": hits(*rng.sample(range(100), 20)),
    }
    expected = [(f.id, f.score) for f in fuse(streams, k=60, cap=300)]
    for _ in range(5):
        keys = list(streams)
        rng.shuffle(keys)
        shuffled: Streams = {key: streams[key] for key in keys}
        assert [(f.id, f.score) for f in fuse(shuffled, k=60, cap=300)] == expected


def test_ties_fall_through_to_id_then_store_order() -> None:
    a = Fused("repo_docs", "doc", 1, 0.5)
    b = Fused("code", "body", 1, 0.5)
    c = Fused("code", "body", 0, 0.5)
    d = Fused("code", "body", 5, 0.6)
    assert [(f.store, f.id) for f in sorted([a, b, c, d], key=score_order)] == [
        ("code", 5),
        ("code", 0),
        ("code", 1),
        ("repo_docs", 1),
    ]


def plain(**changes: object) -> FusionPlan:
    """Fusion with no containment (unless `skip` says otherwise), at k 60."""
    changes.setdefault("skip", frozenset({"containment"}))
    return FusionPlan(k=60, cap=300, **changes)  # type: ignore[arg-type]


def test_one_stream_ranks_every_store_on_its_raw_score() -> None:
    # A document and a node with the same row id are two candidates, each in its store.
    code = hits(1, 2, start=0.9)
    docs = hits(1, unit="doc", start=0.95, store="repo_docs")
    joined = merge_lists([code, docs])
    assert [(h.store, h.id) for h in joined] == [("repo_docs", 1), ("code", 1), ("code", 2)]
    fused = fuse({"vector": joined}, k=10, cap=300)
    assert [(f.store, f.unit, f.id) for f in fused] == [
        ("repo_docs", "doc", 1),
        ("code", "body", 1),
        ("code", "body", 2),
    ]
    assert [p.rank for f in fused for p in f.provenance] == [1, 2, 3]  # one list, one rank


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        fuse({}, k=0, cap=10)
    with pytest.raises(ValueError):
        fuse({}, k=60, cap=0)
    assert fuse({}, k=60, cap=10) == []


def test_exact_symbol_matches_are_pinned_first_by_the_pin_stage() -> None:
    # Node 7 is ranked first by vector and lexical; node 9 only by the symbol stream, but
    # the query names it outright, so it leads. Among exact matches fused order decides.
    streams: Streams = {
        "vector": [StreamHit("body", 7, 0.9), StreamHit("body", 8, 0.8)],
        "lexical": [StreamHit("body", 7, 0.5), StreamHit("body", 8, 0.4)],
        "symbol": [
            StreamHit("body", 9, 1.0, exact=2),
            StreamHit("body", 8, 0.9, exact=2),
            StreamHit("body", 7, 0.4),
        ],
    }
    fused = fuse(streams, k=60, cap=300)
    assert [f.id for f in fused] == [7, 8, 9]  # fusion alone: RRF order
    assert [f.exact for f in fused] == [0, 2, 2]
    lists: dict[Store, dict[StreamName, list[StreamHit]]] = {"code": streams}
    ranked = rank(lists, plain())
    assert [f.id for f in ranked] == [8, 9, 7]
    # Node 7 fused higher than node 9 on RRF alone; the pin shows in the score too.
    assert ranked[0].score > ranked[1].score > ranked[2].score
    assert [f.id for f in rank(lists, plain(skip=frozenset({"containment", "pin"})))] == [7, 8, 9]


def test_layer_weights_scale_fused_scores_and_never_lift_a_row_over_a_pin() -> None:
    streams: Streams = {
        "vector": [
            StreamHit("body", 1, 0.9),
            StreamHit("summary", 2, 0.8),
            StreamHit("doc", 3, 0.7, store="repo_docs"),
        ]
    }
    lists: dict[Store, dict[StreamName, list[StreamHit]]] = {"code": streams}
    assert [f.id for f in rank(lists, plain())] == [1, 2, 3]
    weighted = rank(lists, plain(layer_weights={"doc": 1.5, "summary": 0.5}))
    assert [f.id for f in weighted] == [3, 1, 2]
    assert [f.score for f in weighted] == pytest.approx([1.5 / 63, 1 / 61, 0.5 / 62])
    # An exact symbol match still leads whatever the weights, and its score says so: the
    # returned scores never rise down the list.
    pinned: Streams = {**streams, "symbol": [StreamHit("body", 9, 1.0, exact=2)]}
    merged = rank({"code": pinned}, plain(layer_weights={"body": 0.01, "doc": 100}))
    assert merged[0].id == 9
    scores = [f.score for f in merged]
    assert scores == sorted(scores, reverse=True)


def test_a_match_in_case_leads_one_that_ignores_case() -> None:
    # Query `Color`: node 5 is the class Color (exact, case agrees), node 6 a method `color`
    # (exact ignoring case) that the other streams like better.
    streams: Streams = {
        "vector": [StreamHit("body", 6, 0.9), StreamHit("body", 5, 0.5)],
        "lexical": [StreamHit("body", 6, 0.5), StreamHit("body", 5, 0.4)],
        "symbol": [StreamHit("body", 5, 1.0, exact=2), StreamHit("body", 6, 1.0, exact=1)],
    }
    assert [f.id for f in fuse(streams, k=10, cap=300)] == [6, 5]
    assert [f.id for f in rank({"code": streams}, plain())] == [5, 6]

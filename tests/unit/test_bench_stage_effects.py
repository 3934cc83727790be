"""bench.quality.stage_effects: which stages moved answers down where fused loses."""

from __future__ import annotations

from collections import Counter

from bench.quality.stage_effects import AnswerPath, Move, attribute


def path(
    qid: str, rank: int | None, moves: list[Move], vector: int, above: dict[str, int]
) -> AnswerPath:
    return AnswerPath(qid, rank, moves, {"vector": vector}, Counter(above))


def test_attribute_counts_only_questions_fused_loses_and_names_the_stages() -> None:
    paths = [
        # Dense had it first; containment pushed it from 2 to 4.
        path("a", 4, [Move("fusion", None, 2), Move("containment", 2, 4)], 3, {"summary": 3}),
        # Dense had it third; fused first: a win, left out of the stage counts.
        path("b", 1, [Move("fusion", None, 3), Move("pin", 3, 1)], 1, {}),
        # Dense had it second; fused missed it entirely.
        path("c", None, [], 0, {}),
        # Dense had it fifth; the vector stream ranked it 9th; test_code lifted it 6 -> 5.
        path("d", 7, [Move("fusion", None, 6), Move("test_code", 6, 5), Move("pin", 5, 7)], 9,
             {"member": 4, "summary": 2}),
    ]  # fmt: skip
    table = attribute(paths, {"a": 1, "b": 3, "c": 2, "d": 5})
    assert (table["questions"], table["fused_worse"], table["fused_better"]) == (4, 3, 1)
    assert table["answer_not_found"] == 1
    assert table["stages"]["containment"] == {"down": 1, "up": 0, "rank_change": 1.0}
    assert table["stages"]["test_code"] == {"down": 0, "up": 1, "rank_change": -0.5}
    assert table["stages"]["pin"] == {"down": 1, "up": 0, "rank_change": 1.0}
    assert "fusion" not in table["stages"]  # it makes the list; it moves nothing
    assert table["vector_stream_worse_than_baseline"] == 2  # a (3 vs 1) and d (9 vs 5)
    assert table["above_answer_share"] == {"summary": 0.556, "member": 0.444}


def test_a_miss_beyond_the_top_ten_is_worse_than_any_hit() -> None:
    far = path("x", 40, [], 40, {})
    table = attribute([far], {"x": 10})
    assert table["fused_worse"] == 1
    assert attribute([far], {"x": None})["fused_worse"] == 0  # both miss: a tie

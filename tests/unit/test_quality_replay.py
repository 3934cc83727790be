"""Offline fusion replay: the search module's fusion applied to stored stream lists."""

from __future__ import annotations

from bench.quality.replay import Candidates, RowIndex, fused_ids, rows_of
from bench.quality.search_client import Row
from retrieval.search.fusion import StreamHit
from retrieval.search.streams import StreamTask

VEC_BODY = StreamTask("code", "body", "vector")
VEC_SUM = StreamTask("code", "summary", "vector")
SYM = StreamTask("code", "body", "symbol")
VEC_DOC = StreamTask("repo_docs", "doc", "vector")


def _candidates() -> Candidates:
    hits = {
        VEC_BODY: [StreamHit("body", 1, 0.9), StreamHit("body", 2, 0.8)],
        VEC_SUM: [StreamHit("summary", 3, 0.85)],
        SYM: [StreamHit("body", 2, 1.0)],
        VEC_DOC: [StreamHit("doc", 7, 0.95, store="repo_docs")],
    }
    return Candidates(tuple(hits), hits)


def test_rrf_order_across_units_and_stores() -> None:
    # The vector stream is one list over units and stores by score: doc 7 (r1), 1 (r2),
    # 3 (r3), 2 (r4); symbol: 2 (r1). Node 2: 1/64 + 1/61 beats every single.
    ids = fused_ids(_candidates(), k=60, cap=300)
    assert ids == [("code", 2), ("repo_docs", 7), ("code", 1), ("code", 3)]


def test_cap_truncates_each_stream_before_fusion() -> None:
    ids = fused_ids(_candidates(), k=60, cap=1)
    # Only the best of each stream survives: the vector stream keeps doc 7, symbol node 2.
    assert set(ids) == {("code", 2), ("repo_docs", 7)}


def test_rows_of_names_rows_and_skips_unknown_ids() -> None:
    index: RowIndex = {
        ("code", 1): Row("r", "a.py", "a.f", 1, 2),
        ("code", 2): Row("r", "a.py", "a.g", 3, 4),
    }
    rows = rows_of([("code", 9), ("code", 2), ("code", 1)], index, limit=1)
    assert rows == [Row("r", "a.py", "a.g", 3, 4)]

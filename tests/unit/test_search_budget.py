"""The token budget: greedy by rank, never over, containment dropped, overlaps merged; and
the compact answer."""

from __future__ import annotations

from cograph_api.proto_json import compact_search
from retrieval.search.budget import apply_budget, default_counter, estimate_tokens, hit_tokens
from retrieval.search.engine import SearchHit


def _hit(path: str, start: int, end: int, snippet: str, layer: str = "code") -> SearchHit:
    return SearchHit(
        id=f"code:{path}:{start}",
        layer=layer,  # type: ignore[arg-type]
        store="code",
        repo="r",
        collection="",
        path=path,
        qualified_name=f"m.f{start}",
        kind="function",
        language="python",
        start_line=start,
        end_line=end,
        commit="c" * 40,
        snippet=snippet,
        truncated=False,
        score=1.0 / start,
        provenance=[],
        vector_score=None,
        bm25_score=None,
        symbol_score=None,
    )


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_the_budget_is_never_exceeded_and_later_fits_are_taken() -> None:
    hits = [_hit("a.py", 1, 5, words(30)), _hit("b.py", 1, 5, words(400)), _hit("c.py", 1, 2, "x")]
    for budget in (50, 80, 120, 300, 1000, 5000):
        fitted = apply_budget(hits, budget, estimate_tokens)
        assert fitted.tokens <= budget
        assert fitted.tokens == sum(hit_tokens(h, estimate_tokens) for h in fitted.hits)
        assert len(fitted.hits) + fitted.omitted == 3
    small = apply_budget(hits, 120, estimate_tokens)
    assert [h.path for h in small.hits] == ["a.py", "c.py"] and small.omitted == 1


def test_contained_ranges_go_and_touching_ones_merge() -> None:
    outer = _hit("a.py", 1, 40, "def outer():\n    inner()")
    inner = _hit("a.py", 10, 20, "def inner(): ...")
    after = _hit("a.py", 41, 50, "def after(): ...")
    other_layer = _hit("a.py", 10, 20, "summary", layer="ast_summary")
    fitted = apply_budget([outer, inner, after, other_layer], 10_000, estimate_tokens)
    assert [(h.path, h.start_line, h.end_line, h.layer) for h in fitted.hits] == [
        ("a.py", 1, 50, "code"),
        ("a.py", 10, 20, "ast_summary"),
    ]
    assert "def after()" in fitted.hits[0].snippet and fitted.omitted == 0


def test_without_a_budget_results_stay_as_ranked() -> None:
    hits = [_hit("a.py", 1, 40, "x"), _hit("a.py", 10, 20, "y")]
    fitted = apply_budget(hits, None, estimate_tokens)
    assert fitted.hits == hits and fitted.omitted == 0 and fitted.tokens > 0


def test_the_packaged_tokenizer_counts() -> None:
    count = default_counter()
    assert count("def retry_failed_charge(charge_id):") > 3
    assert count("") == 0


def test_compact_answer_keeps_what_agents_act_on() -> None:
    full = {
        "query": "q",
        "results": [
            {
                "id": "code:1",
                "layer": "code",
                "store": "code",
                "repo": "r",
                "collection": "",
                "path": "a.py",
                "qualified_name": "m.f",
                "kind": "function",
                "start_line": 3,
                "end_line": 9,
                "commit": "0123456789abcdef0123",
                "snippet": "def f(): ...",
                "truncated": False,
                "score": 0.123456789,
                "provenance": [{"stream": "lexical", "rank": 1, "score": 0.5}],
                "vector_score": None,
            }
        ],
        "streams": {"vector": "unavailable", "lexical": "ok", "symbol": "ok"},
        "graph": None,
        "timings_ms": {"total": 12.5},
        "tokens": 10,
        "omitted": 2,
    }
    assert compact_search(full) == {
        "query": "q",
        "results": [
            {
                "location": "a.py:3-9",
                "repo": "r",
                "qualified_name": "m.f",
                "kind": "function",
                "commit": "0123456789ab",
                "snippet": "def f(): ...",
                "score": 0.1235,
            }
        ],
        "tokens": 10,
        "omitted": 2,
        "streams": {"vector": "unavailable"},
    }


def test_a_merge_absorbs_every_range_it_reaches() -> None:
    method = _hit("a.py", 12, 14, "def invoke(): ...")
    helper = _hit("a.py", 20, 22, "def helper(): ...")
    whole = _hit("a.py", 1, 40, "class Context: ...")
    fitted = apply_budget([method, helper, whole], 10_000, estimate_tokens)
    assert [(h.start_line, h.end_line) for h in fitted.hits] == [(1, 40)]
    assert fitted.tokens == hit_tokens(fitted.hits[0], estimate_tokens)
    for budget in range(20, 120, 7):
        spans = apply_budget([method, helper, whole], budget, estimate_tokens)
        assert spans.tokens <= budget
        ranges = [(h.start_line, h.end_line) for h in spans.hits]
        for i, (s1, e1) in enumerate(ranges):
            for s2, e2 in ranges[i + 1 :]:
                assert e1 + 1 < s2 or e2 + 1 < s1, ranges

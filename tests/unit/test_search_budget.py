"""The token budget: greedy by rank, never over, containment dropped, overlaps merged; and
the compact answer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.proto_json import to_json
from cograph_api.search_forms import answer_form, compact_search, dumps
from cograph_api.tokens import Counter, default_counter, estimate_tokens, numbers_apart
from retrieval.search.budget import apply_budget, fit_answer
from retrieval.search.engine import SearchHit, SearchOutcome
from retrieval.search.graph import GraphEdge, GraphNode, GraphResult
from svckit.errors import InvalidArgument


def hit_tokens(hit: SearchHit, count: Counter = estimate_tokens) -> int:
    """A cost for the pure budget tests: the location line and the snippet."""
    where = f"{hit.path}:{hit.start_line}-{hit.end_line} {hit.qualified_name}"
    return count(where) + count(hit.snippet)


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
        fitted = apply_budget(hits, budget, hit_tokens)
        assert fitted.tokens <= budget
        assert fitted.tokens == sum(hit_tokens(h) for h in fitted.hits)
        assert len(fitted.hits) + fitted.omitted == 3
    small = apply_budget(hits, 120, hit_tokens)
    assert [h.path for h in small.hits] == ["a.py", "c.py"] and small.omitted == 1


def test_contained_ranges_go_and_touching_ones_merge() -> None:
    outer = _hit("a.py", 1, 40, "def outer():\n    inner()")
    inner = _hit("a.py", 10, 20, "def inner(): ...")
    after = _hit("a.py", 41, 50, "def after(): ...")
    other_layer = _hit("a.py", 10, 20, "summary", layer="ast_summary")
    fitted = apply_budget([outer, inner, after, other_layer], 10_000, hit_tokens)
    assert [(h.path, h.start_line, h.end_line, h.layer) for h in fitted.hits] == [
        ("a.py", 1, 50, "code"),
        ("a.py", 10, 20, "ast_summary"),
    ]
    assert "def after()" in fitted.hits[0].snippet and fitted.omitted == 0


def test_without_a_budget_results_stay_as_ranked() -> None:
    hits = [_hit("a.py", 1, 40, "x"), _hit("a.py", 10, 20, "y")]
    fitted = apply_budget(hits, None, hit_tokens)
    assert fitted.hits == hits and fitted.omitted == 0 and fitted.tokens > 0


def test_the_counter_is_cl100k() -> None:
    count = default_counter()
    assert count is not estimate_tokens  # the shipped vocabulary loaded
    # cl100k_base splits this into def / retry / _failed / _charge / ( / charge / _id / ):
    assert count("def retry_failed_charge(charge_id):") == 8
    assert count("") == 0
    assert count("<|endoftext|>") > 1  # special-token text is counted as plain text


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
        "repo": "r",
        "commit": "0123456789ab",
        "results": [
            {
                "location": "a.py:3-9",
                "qualified_name": "m.f",
                "kind": "function",
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
    fitted = apply_budget([method, helper, whole], 10_000, hit_tokens)
    assert [(h.start_line, h.end_line) for h in fitted.hits] == [(1, 40)]
    assert fitted.tokens == hit_tokens(fitted.hits[0])
    for budget in range(20, 120, 7):
        spans = apply_budget([method, helper, whole], budget, hit_tokens)
        assert spans.tokens <= budget
        ranges = [(h.start_line, h.end_line) for h in spans.hits]
        for i, (s1, e1) in enumerate(ranges):
            for s2, e2 in ranges[i + 1 :]:
                assert e1 + 1 < s2 or e2 + 1 < s1, ranges


# ---- the whole answer as sent (fit_answer) ----


def _outcome(hits: list[SearchHit], graph: GraphResult | None = None) -> SearchOutcome:
    return SearchOutcome(
        query="how does billing retry a failed charge",
        results=hits,
        streams={"vector": "ok", "lexical": "ok", "symbol": "ok"},
        graph=graph,
        timings_ms={"total": 12.25, "embed": 3.5},
    )


def _code(i: int, repo: str = "r") -> SearchHit:
    body = "\n".join(f"    value_{j} = compute_{i}(value_{j - 1}) + {j}" for j in range(1, 4 + i))
    return replace(_hit(f"pkg/m{i}.py", i * 100, i * 100 + 5, body), repo=repo, score=1 / i)


def _sent(reply: pb.SearchResponse, verbose: bool) -> int:
    """Tokens of the body exactly as REST sends it."""
    return default_counter()(dumps(answer_form(to_json(reply), verbose)))


@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("repos", [("r",), ("r", "other")])
def test_the_answer_as_sent_never_exceeds_max_tokens(verbose: bool, repos: tuple[str, ...]) -> None:
    hits = [_code(i, repos[i % len(repos)]) for i in range(1, 16)]
    seen = set()
    for budget in (100, 130, 170, 250, 400, 700, 1200, 5000):
        reply = fit_answer(_outcome(list(hits)), budget, verbose)
        sent = _sent(reply, verbose)
        assert sent <= reply.tokens <= budget
        assert reply.tokens - sent <= 1  # `tokens` is exact but for its own last digit
        assert len(reply.results) + reply.omitted == len(hits)
        seen.add(len(reply.results))
    assert len(seen) > 3  # budgets really decided how much was kept


def test_one_source_is_said_once_and_buys_more_results() -> None:
    single = fit_answer(_outcome([_code(i) for i in range(1, 16)]), 600, False)
    body = answer_form(to_json(single), False)
    assert body["repo"] == "r" and body["commit"] == "c" * 12
    assert all("repo" not in row and "commit" not in row for row in body["results"])
    mixed = fit_answer(_outcome([_code(i, f"r{i % 2}") for i in range(1, 16)]), 600, False)
    mixed_body = answer_form(to_json(mixed), False)
    assert "repo" not in mixed_body and all("repo" in row for row in mixed_body["results"])
    assert len(single.results) >= len(mixed.results)


def test_without_a_budget_tokens_count_the_whole_answer() -> None:
    reply = fit_answer(_outcome([_code(i) for i in range(1, 11)]), None, False)
    assert len(reply.results) == 10 and reply.omitted == 0
    assert reply.tokens - _sent(reply, False) in (0, 1)
    verbose = fit_answer(_outcome([_code(i) for i in range(1, 11)]), None, True)
    assert verbose.tokens > reply.tokens  # provenance, ids, timings


def test_a_graph_takes_at_most_half_the_budget() -> None:
    nodes = [
        GraphNode(
            f"code:{i}",
            "r",
            f"pkg/n{i}.py",
            f"pkg.n{i}.helper_{i}",
            "function",
            1,
            9,
            f"def helper_{i}(argument_one, argument_two, argument_three):",
        )
        for i in range(20)
    ]
    edges = [GraphEdge("code:1", node.id, "calls") for node in nodes]
    reply = fit_answer(
        _outcome([_code(i) for i in range(1, 6)], GraphResult(nodes, edges)), 300, False
    )
    assert 0 < len(reply.graph.nodes) < 20 and reply.graph.truncated
    assert {e.to for e in reply.graph.edges} <= {n.id for n in reply.graph.nodes}
    assert _sent(reply, False) <= 300 and reply.results


def test_a_budget_below_the_bare_answer_is_refused() -> None:
    outcome = _outcome([_code(1)])
    outcome.query = "billing " * 200
    with pytest.raises(InvalidArgument, match="max_tokens 50 is below"):
        fit_answer(outcome, 50, False)


def test_compact_streams_say_why_a_stream_is_unavailable() -> None:
    answer = {
        "query": "q",
        "results": [],
        "streams": {
            "vector": "unavailable",
            "lexical": "ok",
            "symbol": "ok",
            "reasons": {"vector": "embedding_model_mismatch"},
        },
    }
    assert compact_search(answer)["streams"] == {
        "vector": "unavailable",
        "reasons": {"vector": "embedding_model_mismatch"},
    }
    healthy = {**answer, "streams": {"vector": "ok", "lexical": "ok", "reasons": {}}}
    assert "streams" not in compact_search(healthy)


@pytest.mark.parametrize("verbose", [False, True])
def test_a_budget_that_holds_no_result_says_the_smallest_that_would(verbose: bool) -> None:
    hits = [_code(i) for i in range(3, 9)]
    with pytest.raises(
        InvalidArgument, match=r"below the \d+ tokens .* \d+ would return the first"
    ):
        fit_answer(_outcome(list(hits)), 20, verbose)
    # The smallest budget that holds the envelope but no result.
    budget = next(b for b in range(20, 400) if _fits_envelope_only(hits, b, verbose))
    reply = fit_answer(_outcome(list(hits)), budget, verbose)
    assert not reply.results and reply.omitted == len(hits)
    needed = reply.first_result_tokens
    assert needed > budget
    assert answer_form(to_json(reply), verbose)["first_result_tokens"] == needed
    # Exactly enough: the first result fits; one token less and it does not.
    enough = fit_answer(_outcome(list(hits)), needed, verbose)
    assert [r.id for r in enough.results] == [hits[0].id]
    assert not enough.HasField("first_result_tokens")
    short = fit_answer(_outcome(list(hits)), needed - 1, verbose)
    assert not short.results or short.results[0].id != hits[0].id
    # Without a budget, or with nothing found, there is nothing to say.
    assert not fit_answer(_outcome(list(hits)), None, verbose).HasField("first_result_tokens")
    assert not fit_answer(_outcome([]), 200, verbose).HasField("first_result_tokens")


def _fits_envelope_only(hits: list[SearchHit], budget: int, verbose: bool) -> bool:
    try:
        return not fit_answer(_outcome(list(hits)), budget, verbose).results
    except InvalidArgument:
        return False


@pytest.mark.parametrize("verbose", [False, True])
def test_an_answer_counted_once_has_the_figure_of_counting_it_to_a_fixed_point(
    verbose: bool,
) -> None:
    """cl100k cuts digits into pieces of their own, so `tokens` adds exactly its own count
    to the answer's (tokens.EncodingCounter.numbers_apart): the one count answers what
    counting the whole answer until the figure stops changing answers, across the digit
    boundaries of the figure."""
    count = default_counter()
    assert numbers_apart(count)

    def plain(text: str) -> int:  # the same counts, without the property
        return count(text)

    figures = set()
    for n in range(1, 60):
        hits = [_code(1 + i % 9) for i in range(n % 7)]
        hits = [replace(h, snippet=h.snippet + " 1" * (n * 7)) for h in hits]
        outcome = _outcome(hits)
        once = fit_answer(outcome, None, verbose)
        assert once.tokens == fit_answer(outcome, None, verbose, plain).tokens
        assert once.tokens == _sent(once, verbose)  # exact
        figures.add(len(str(once.tokens)))
        body = to_json(once)
        body["tokens"] = 0
        rest = count(dumps(answer_form(body, verbose))) - count("0")
        for figure in (7, 99, 100, 999, 1000, 123456):
            body["tokens"] = figure
            assert count(dumps(answer_form(body, verbose))) == rest + count(str(figure))
    assert len(figures) >= 2  # the figures crossed a digit boundary

"""A hard token budget on search answers (max_tokens), applied after ranking.

What is counted is the answer the caller receives: its JSON in the form asked for (compact
unless verbose; `cograph_api.search_forms`), counted with `cograph_api.tokens` (cl100k_base).
The answer's envelope (query, counts, stream states, a graph) is reserved first; results
are then taken in fused order. A result whose line range lies inside one already taken
from the same file (and layer) adds nothing and is dropped; one that overlaps or touches
such a range is merged into it (the union of the ranges, its snippet appended unless the
first already holds it). A result is kept only when the total still fits, and the scan
goes on past one that does not (a later, shorter result may fit). The finished answer is
counted once more as a whole and loses its last results while it is over: it never holds
more than `max_tokens`. Without a budget the results are left as ranked and only counted.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api import search_forms
from cograph_api.proto_json import to_json
from cograph_api.tokens import Counter, default_counter
from retrieval.search.engine import SearchHit, SearchOutcome
from retrieval.search.messages import hit_to_pb, outcome_to_pb
from svckit.errors import InvalidArgument

Cost = Callable[[SearchHit], int]


@dataclass(frozen=True)
class Budgeted:
    hits: list[SearchHit]
    tokens: int
    omitted: int


def _key(hit: SearchHit) -> tuple[str, str, str, str]:
    return (hit.repo, hit.collection, hit.path, hit.layer)


def _contains(outer: SearchHit, inner: SearchHit) -> bool:
    return outer.start_line <= inner.start_line and inner.end_line <= outer.end_line


def _touches(a: SearchHit, b: SearchHit) -> bool:
    """Overlapping or adjacent line ranges."""
    return a.start_line <= b.end_line + 1 and b.start_line <= a.end_line + 1


def _merge(kept: SearchHit, other: SearchHit) -> SearchHit:
    snippet = kept.snippet
    if other.snippet.strip() and other.snippet not in snippet:
        first, second = (kept, other) if kept.start_line <= other.start_line else (other, kept)
        snippet = f"{first.snippet}\n…\n{second.snippet}"
    # The merged range keeps the notes of both, each once, the better-ranked result's first.
    seen = {note.id for note in kept.notes}
    notes = kept.notes + [n for n in other.notes if n.id not in seen]
    return replace(
        kept,
        start_line=min(kept.start_line, other.start_line),
        end_line=max(kept.end_line, other.end_line),
        snippet=snippet,
        truncated=kept.truncated or other.truncated,
        notes=notes,
    )


def apply_budget(hits: Sequence[SearchHit], max_tokens: int | None, cost: Cost) -> Budgeted:
    """The hits whose costs fit `max_tokens`, merged, in rank order; without a budget every
    hit, as it is, with its cost."""
    if max_tokens is None:
        return Budgeted(list(hits), sum(cost(h) for h in hits), 0)
    kept: list[SearchHit] = []
    costs: list[int] = []
    total = 0
    omitted = 0
    for hit in hits:
        same = [i for i, prior in enumerate(kept) if hit.path and _key(prior) == _key(hit)]
        if any(_contains(kept[i], hit) for i in same):
            continue  # adds nothing
        touching = [i for i in same if _touches(kept[i], hit)]
        if touching:
            # Merge into the best-ranked of them, absorbing every other it now touches.
            candidate = _merge(kept[touching[0]], hit)
            for i in touching[1:]:
                candidate = _merge(candidate, kept[i])
            merged = set(touching)
            for i in same:
                if i not in merged and _touches(kept[i], candidate):
                    candidate = _merge(candidate, kept[i])
                    merged.add(i)
            price = cost(candidate)
            extra = price - sum(costs[i] for i in merged)
            if total + extra > max_tokens:
                omitted += 1
                continue
            first = min(merged)
            kept[first], costs[first] = candidate, price
            for i in sorted(merged - {first}, reverse=True):
                del kept[i], costs[i]
            total += extra
            continue
        price = cost(hit)
        if total + price <= max_tokens:
            kept.append(hit)
            costs.append(price)
            total += price
        else:
            omitted += 1
    return Budgeted(kept, total, omitted)


def _graph_within(outcome: SearchOutcome, limit: int, envelope: Callable[[], int]) -> None:
    """Drops graph neighbours from the end (marking the graph cut) until the envelope
    costs at most `limit`; the graph goes entirely when even its edges do not fit."""
    graph = outcome.graph
    while graph is not None and envelope() > limit:
        if not graph.nodes:
            outcome.graph = graph = None
            break
        dropped = graph.nodes[-1].id
        graph.nodes = graph.nodes[:-1]
        graph.edges = [e for e in graph.edges if dropped not in (e.src, e.dst)]
        graph.truncated = True


def fit_answer(
    outcome: SearchOutcome,
    max_tokens: int | None,
    verbose: bool,
    count: Counter | None = None,
    *,
    hint: bool = True,
) -> pb.SearchResponse:
    """The reply for `outcome`: within `max_tokens` when set, with `tokens` (the answer as
    sent, counted) and `omitted` (results that did not fit)."""
    counter = count or default_counter()
    rows = [to_json(hit_to_pb(hit)) for hit in outcome.results]
    hoisted = not verbose and search_forms.single_source(rows) is not None

    def cost(hit: SearchHit) -> int:
        return search_forms.result_cost(
            to_json(hit_to_pb(hit)), verbose=verbose, hoisted=hoisted, count=counter
        )

    def envelope() -> int:
        # Counted at its largest: tokens = max_tokens, every candidate omitted.
        empty = replace(outcome, results=[])
        body = to_json(outcome_to_pb(empty))
        body["tokens"] = max_tokens or 0
        body["omitted"] = len(rows)
        shared = search_forms.count_source(rows[0], counter) if hoisted and rows else 0
        return counter(search_forms.dumps(search_forms.answer_form(body, verbose))) + shared

    reserve = 0
    if max_tokens is not None:
        # Results before neighbours: the graph may take at most half of the budget.
        _graph_within(outcome, max_tokens // 2, envelope)
        reserve = min(envelope(), max_tokens)  # over: the final count says so
    fitted = (
        Budgeted(list(outcome.results), 0, 0)
        if max_tokens is None
        else apply_budget(outcome.results, max_tokens - reserve, cost)
    )
    kept = list(fitted.hits)
    omitted = fitted.omitted
    while True:
        reply = outcome_to_pb(replace(outcome, results=kept))
        reply.omitted = omitted
        if hint and max_tokens is not None and not kept and outcome.results:
            # Nothing fitted: say what would have, so the caller does not guess.
            reply.first_result_tokens = _first_result_tokens(outcome, verbose, counter)
        tokens = search_forms.answer_tokens(to_json(reply), verbose, counter)
        if max_tokens is None or tokens <= max_tokens:
            reply.tokens = tokens
            return reply
        if not kept:
            first = (
                f"; {_first_result_tokens(outcome, verbose, counter)} would return the first"
                if hint and outcome.results
                else ""
            )
            raise InvalidArgument(
                f"max_tokens {max_tokens} is below the {tokens} tokens the answer needs "
                f"without any result (the query and the answer's fields){first}"
            )
        kept.pop()  # a token or two of JSON joins counted apart: the last result goes
        omitted += 1


def _first_result_tokens(outcome: SearchOutcome, verbose: bool, counter: Counter) -> int:
    """The smallest max_tokens whose answer holds the first result. The answer holding only
    that result, counted, is where it starts; the fit reserves its envelope at its largest
    (a count and an `omitted` of the most digits), so a few tokens more may be needed:
    each candidate is checked by fitting it."""
    reply = outcome_to_pb(replace(outcome, results=outcome.results[:1]))
    reply.omitted = len(outcome.results) - 1
    start = search_forms.answer_tokens(to_json(reply), verbose, counter)
    first = outcome.results[0].id
    for budget in range(start, start + _FIRST_RESULT_SLACK):
        probe = replace(outcome, graph=copy.deepcopy(outcome.graph))
        try:
            fitted = fit_answer(probe, budget, verbose, counter, hint=False)
        except InvalidArgument:
            continue
        if fitted.results and fitted.results[0].id == first:
            return budget
    return start + _FIRST_RESULT_SLACK


# The envelope's reserve exceeds the exact count by the digits of two numbers at most.
_FIRST_RESULT_SLACK = 64

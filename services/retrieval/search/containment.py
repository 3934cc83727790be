"""One result per piece of code: containers fold into their members, layers into one row.

A fused code list holds near-duplicates an agent pays for twice: a module (or class) and
the function it contains, which in a small file are almost the same text, and one node's
`code` row beside its `ast_summary` row. `collapse` keeps one row for each such group:

- **Layers.** A node's body and summary units are one node; the better-scored unit (after
  RETRIEVAL_LAYER_WEIGHTS) stays.
- **Containment.** Among the candidates, the most specific node that covers what matched
  stays, and every container of it is folded into it: a container with candidate members
  is folded into its best-ranked member that has none of its own; a container none of
  whose members is a candidate stays itself. A function or method ranked above a function
  nested in it stays whatever the member ratio: closures, callbacks and local helpers are
  its implementation (`exclude` rather than its inner `exclude_`); one ranked below its
  nested function gives way as before (a factory's inner functions can be its API).
- **Small classes.** A class (struct, interface, trait, enum) ranked above its best member
  stays, whatever the member ratio, when it spans at most `class_lines` lines and either
  its own vector score is at least the member's or the member is its constructor (which
  restates the class): the question describes the class, and a class that size is still
  one thing an agent can read. Larger classes are namespaces of their members and give
  way as before (bench/notes/quality-unseen.md, "Small classes stay").
- **Exact names.** A node the query names outright (the symbol stream's `exact`) is what
  matched, whatever it contains: it stays, its members and its containers are folded into
  it. Between a container and a member named equally, the container stays (the query
  `Range` names the class before its constructor). A class a prose question calls a type
  ("the FastTimer class", `type_names`) counts as named too, below any exact name, wherever
  it ranks against its members; so does a class of at most `class_lines` lines whose name
  the question opens with, written as code (`MockPool provides an API ...`,
  `subject_names`). A larger class so named is a namespace the sentence only places its
  member in ("BooleanUtils instances should not be constructed": the constructor).

Folding keeps the evidence's place: the row that stays ranks where the best-scored row of
its group ranked, and reports that row's provenance (stream, rank, raw score), so its score
is still the sum its provenance says. A function whose module was the vector stream's first
hit ranks where the module ranked, once and never twice. (`fold="union"`, each stream's
best rank over the group summed, was measured and lost: it lifts every node whose
container happens to be a candidate, bench/notes/quality-unseen.md, "Containment".)

Pure: no I/O; spans come with the stream hits (search_sql).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

from cograph_text.names import short_name
from retrieval.layers import Unit
from retrieval.search.fusion import Fused, Provenance, StreamName, rrf_score, score_order

_ORDER = ("vector", "lexical", "symbol")
# Containers whose nested definitions are their implementation
# (bench/notes/quality-unseen.md, "Nested functions stay in their function").
_CALLABLE = frozenset({"function", "method"})
# Containers that can be the answer themselves (an `impl` block is a list of methods).
_TYPES = frozenset({"class", "struct", "interface", "trait", "enum"})
# A member named like this (or like its class, Java's and C#'s rule) is a constructor.
_CONSTRUCTORS = frozenset({"__init__", "constructor"})
# "member": the most specific; "better": the better ranked; a number r: the member when it
# scores at least r times its container's score.
Prefer = Literal["member", "better"] | float
Fold = Literal["max", "union"]


def collapse(
    items: Sequence[Fused],
    k: int,
    stream_weights: Mapping[StreamName, float] | None = None,
    unit_weights: Mapping[Unit, float] | None = None,
    *,
    prefer: Prefer = "member",
    fold: Fold = "max",
    class_lines: int = 0,
    type_names: frozenset[str] = frozenset(),
    subject_names: frozenset[str] = frozenset(),
) -> list[Fused]:
    """One store's fused list (best first) with layer duplicates and nested nodes folded,
    best first again. Rows without a span (documents) pass through unchanged. `prefer`
    says which of a container and its member stays when the query names neither:
    `member` (the most specific), `better` (the better ranked) or a member ratio; under a
    ratio, a class of at most `class_lines` lines may stay on its own evidence (0: never).
    `type_names`: names the question calls a type (query_text.type_names);
    `subject_names`: the name it opens with (query_text.subject_names).
    """
    units = unit_weights or {}

    # Layers: one row per node id, the better weighted unit kept (earlier in the list on a
    # tie, which is the fused order).
    by_node: dict[int, Fused] = {}
    groups: dict[int, list[Fused]] = {}
    order: list[int] = []
    passthrough: list[Fused] = []
    for item in items:
        if item.span is None:
            passthrough.append(item)
            continue
        if item.id not in by_node:
            by_node[item.id] = item
            groups[item.id] = [item]
            order.append(item.id)
            continue
        groups[item.id].append(item)
        kept = by_node[item.id]
        if item.score * units.get(item.unit, 1.0) > kept.score * units.get(kept.unit, 1.0):
            by_node[item.id] = item
    # The symbol stream names the node, whichever of its units scores better: the kept
    # unit carries the exact match (a summary outscoring the named body must not let the
    # class fold into a member as if the query had not named it).
    for node in order:
        named = max(item.exact for item in groups[node])
        if by_node[node].exact < named:
            by_node[node] = replace(by_node[node], exact=named)
    rank_of = {node: i for i, node in enumerate(order)}
    # Best first by weighted score, the fused order on ties.
    order.sort(key=lambda n: (-by_node[n].score * units.get(by_node[n].unit, 1.0), rank_of[n]))

    target = _targets(
        order,
        by_node,
        prefer,
        class_lines=class_lines,
        type_names=type_names,
        subject_names=subject_names,
    )
    members: dict[int, list[Fused]] = {node: [] for node in order if target[node] == node}
    for node in order:
        members[target[node]].extend(groups[node])

    out: list[Fused] = list(passthrough)
    for node, group in members.items():
        kept = by_node[node]
        if len(group) > 1:
            kept = _fold(kept, group, k, stream_weights, fold)
        out.append(kept)
    out.sort(key=score_order)
    return out


def _targets(
    order: Sequence[int],
    nodes: Mapping[int, Fused],
    prefer: Prefer,
    *,
    class_lines: int = 0,
    type_names: frozenset[str] = frozenset(),
    subject_names: frozenset[str] = frozenset(),
) -> dict[int, int]:
    """Which node each node's evidence goes to (itself when it stays)."""
    spans = {n: nodes[n].span for n in order}
    by_file: dict[tuple[int, str], list[int]] = {}
    for n in order:
        span = spans[n]
        assert span is not None
        by_file.setdefault((span.repository_id, span.path), []).append(n)
    ancestors: dict[int, list[int]] = {n: [] for n in order}
    descendants: dict[int, list[int]] = {n: [] for n in order}  # best first
    for same_file in by_file.values():
        if len(same_file) < 2:
            continue
        for outer in same_file:
            outer_span = spans[outer]
            assert outer_span is not None
            for inner in same_file:
                inner_span = spans[inner]
                assert inner_span is not None
                if outer != inner and outer_span.covers(inner_span):
                    ancestors[inner].append(outer)
                    descendants[outer].append(inner)

    # How outright each node is named: the symbol stream's levels, doubled, above 1 for a
    # class the question calls a type ("the FastTimer class") or, small, opens with.
    exact = {n: 2 * nodes[n].exact for n in order}
    for n in order:
        if exact[n] == 0 and _called(nodes[n], type_names, subject_names, class_lines):
            exact[n] = 1
    target = {n: n for n in order}

    # Named nodes: no member named better, no container named as well or better. A
    # module named like its member is the file named after it: the member stays.
    def beats(outer: int, inner: int) -> bool:
        if exact[outer] != exact[inner]:
            return exact[outer] > exact[inner]
        return _kind(nodes[outer]) != "module"

    named = [
        n
        for n in order
        if exact[n] > 0
        and all(exact[d] == 0 or beats(n, d) for d in descendants[n])
        and all(exact[a] == 0 or not beats(a, n) for a in ancestors[n])
    ]
    claimed: set[int] = set()
    for n in named:  # best first: a container of two named nodes goes to the better one
        for d in descendants[n]:
            target[d] = n
            claimed.add(d)
    for n in named:
        for a in ancestors[n]:
            if a not in claimed:
                target[a] = n
                claimed.add(a)
    rest = [n for n in order if n not in claimed and n not in named]
    score = {n: nodes[n].score for n in order}
    ratio = 0.0 if prefer == "member" else (float("inf") if prefer == "better" else prefer)
    # Best first: a container gives way to its best remaining member when that member
    # scores at least `ratio` times as well (a module always does: it is its file);
    # otherwise it stays and takes every remaining relative.
    for n in rest:
        if n in claimed:
            continue
        below = [d for d in descendants[n] if d not in claimed]
        # A function or method ranked above a function nested in it keeps it (the better
        # ranked stays, whatever the ratio); so does a small class on its own evidence.
        keeps = not isinstance(prefer, str) and (
            _kind(nodes[n]) in _CALLABLE
            or (bool(below) and _class_stays(nodes[n], nodes[below[0]], class_lines))
        )
        if below and (
            _kind(nodes[n]) == "module" or (not keeps and score[below[0]] >= ratio * score[n])
        ):
            target[n] = below[0]
            claimed.add(n)
            continue
        for relative in (*below, *ancestors[n]):
            if relative not in claimed:
                target[relative] = n
                claimed.add(relative)
        claimed.add(n)
    for n in order:  # follow the chains: a member that gave way in turn, ...
        seen = {n}
        while target[target[n]] != target[n] and target[n] not in seen:
            seen.add(target[n])
            target[n] = target[target[n]]
    return target


def _kind(item: Fused) -> str:
    return item.span.kind if item.span is not None else ""


def _lines(item: Fused) -> int:
    span = item.span
    return span.end_line - span.start_line + 1 if span is not None else 0


def _called(
    item: Fused, type_names: frozenset[str], subject_names: frozenset[str], class_lines: int
) -> bool:
    """Whether the question names this class: calls it a type, or opens with its name and
    the class is small enough to be the answer itself."""
    if _kind(item) not in _TYPES:
        return False
    name = _short_name(item)
    return name in type_names or (name in subject_names and _lines(item) <= class_lines)


def _class_stays(container: Fused, member: Fused, class_lines: int) -> bool:
    """A small class ranked above its best member keeps it when the class's own vector
    matched at least as well, or when the member is its constructor."""
    if _kind(container) not in _TYPES or container.exact or _lines(container) > class_lines:
        return False
    own, members = container.raw("vector") or 0.0, member.raw("vector") or 0.0
    return own >= members or _is_constructor(container, member)


def _short_name(item: Fused) -> str:
    """The last part of the node's name, without the `#N` of a repeated definition."""
    return short_name(item.span.qualified_name if item.span is not None else "")


def _is_constructor(container: Fused, member: Fused) -> bool:
    name = _short_name(member)
    return name in _CONSTRUCTORS or (bool(name) and name == _short_name(container))


def _fold(
    kept: Fused,
    group: Sequence[Fused],
    k: int,
    stream_weights: Mapping[StreamName, float] | None,
    fold: Fold,
) -> Fused:
    best: dict[StreamName, Provenance] = {}
    for item in group:
        for prov in item.provenance:
            seen = best.get(prov.stream)
            if seen is None or prov.rank < seen.rank:
                best[prov.stream] = prov
    if fold == "union":
        provenance = [best[name] for name in _ORDER if name in best]
        score = rrf_score(provenance, k, stream_weights)
    else:
        # The place of the group's best row, with that row's provenance, so the score is
        # still the sum its provenance says (kept first on a tie).
        top = max(group, key=lambda item: (item.score, item is kept))
        provenance, score = list(top.provenance), top.score
    return Fused(
        kept.store,
        kept.unit,
        kept.id,
        score,
        provenance,
        max(item.exact for item in group),
        kept.span,
        # Where the kept row lies: a tie with another result falls through to it, as for
        # every fused row, not to the row ids (fusion.Place).
        kept.place,
    )

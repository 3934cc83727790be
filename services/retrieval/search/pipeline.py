"""The ranking pipeline: from each stream's candidates to one ranked list, stage by stage.

`STAGES` lists every stage in the order `rank` runs them, each with when it applies, what
it does and the measurement that keeps it, in a line. `rank` is that list written out: no
other code reorders the fused list. A request may skip any stage but `fusion`
(`SearchRequest.skip_stages`, for evaluation: each stage's ablation is one request), and
`explain` records each stage's effect on every candidate (`Trace`), which the engine turns
into the per-result explanation the answer carries.

Exact symbol matches are placed in one stage, `pin`; earlier stages only carry the symbol
stream's verdict (`exact`), which containment reads as "the query names this node".

Pure: no I/O. The engine and the offline replay (bench/quality) both call `rank`, so what
the harness measures is what the service does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from retrieval.layers import Store, Unit
from retrieval.search.containment import collapse
from retrieval.search.fusion import (
    PIN_SCORE,
    STREAM_NAMES,
    Fused,
    StreamHit,
    StreamName,
    fuse,
    merge_lists,
    score_order,
)
from retrieval.search.name_words import name_word_hits
from retrieval.search.overloads import order_by_code, share_summaries
from retrieval.search.ranking import FusionPlan

StageName = Literal[
    "name_words",
    "shared_summaries",
    "fusion",
    "containment",
    "layer_weights",
    "test_code",
    "pin",
    "overload_order",
]
STAGE_NAMES: tuple[StageName, ...] = get_args(StageName)


@dataclass(frozen=True)
class Stage:
    name: StageName
    when: str  # when it applies
    does: str  # what it does
    evidence: str  # the measurement that keeps it (bench/notes/...)


STAGES: tuple[Stage, ...] = (
    Stage(
        "name_words",
        "a prose or mixed question whose symbol stream matched no name written as code",
        "fills the symbol stream with the found members whose names the question's words say",
        'bench/notes/quality-unseen.md, "Names said in words"',
    ),
    Stage(
        "shared_summaries",
        "a stream ranks the summary of an overload (one name defined twice in a file)",
        "gives the summary's place to the overload whose code that stream ranks best",
        'bench/notes/quality-unseen.md, "Overloads share their summaries"',
    ),
    Stage(
        "fusion",
        "always",
        "weighted reciprocal rank fusion, the weights of the query's class (prose, mixed, ...)",
        'bench/notes/quality-unseen.md, "Query-adaptive fusion"',
    ),
    Stage(
        "containment",
        "code rows that contain one another (module, class, member) or one node's two units",
        "keeps one row per group at the group's best place: the member on prose, the better "
        "ranked on names",
        'bench/notes/quality-unseen.md, "Containment", "Small classes stay"',
    ),
    Stage(
        "layer_weights",
        "RETRIEVAL_LAYER_WEIGHTS is set",
        "multiplies each row's score by its layer's weight",
        "an operator's choice, off by default",
    ),
    Stage(
        "test_code",
        "code under a test path (tests/, test_*.py, *_test.go, *.spec.ts, *Test.java)",
        "multiplies its score by RETRIEVAL_TEST_CODE_WEIGHT",
        'bench/notes/quality-unseen.md, "What crowds the top"',
    ),
    Stage(
        "pin",
        "the symbol stream found a node the query names exactly",
        "places exact names first (as written, then ignoring case) and adds the pin to their score",
        "docs/adr/0003-rrf-k-and-exact-symbol-pinning.md",
    ),
    Stage(
        "overload_order",
        "a prose or mixed question whose results hold overloads of one name",
        "reorders the overloads among their places by the vector stream's rank of their code",
        'bench/notes/quality-unseen.md, "Overloads ordered by their code"',
    ),
)
SKIPPABLE: frozenset[StageName] = frozenset(STAGE_NAMES) - {"fusion"}

Key = tuple[Store, Unit, int]


def key_of(item: Fused) -> Key:
    return (item.store, item.unit, item.id)


@dataclass(frozen=True, slots=True)
class StageRun:
    """What one stage did to a query: whether it applied, and a line saying what."""

    name: str  # a StageName, or `rerank` (the engine's, after hydration)
    applied: bool
    detail: str


@dataclass
class Trace:
    """Each stage's run and, for the stages after fusion, every candidate's 1-based rank and
    score once it was done (`explain`)."""

    runs: list[StageRun] = field(default_factory=list)
    places: list[tuple[StageName, dict[Key, tuple[int, float]]]] = field(default_factory=list)

    def ran(
        self,
        name: StageName,
        applied: bool,
        detail: str,
        items: Sequence[Fused] | None = None,
    ) -> None:
        self.runs.append(StageRun(name, applied, detail))
        if items is not None and applied:
            self.places.append(
                (name, {key_of(item): (i, item.score) for i, item in enumerate(items, 1)})
            )


@dataclass(frozen=True, slots=True)
class StageEffect:
    """One stage's effect on one result: its 1-based rank and score before and after (none
    before `fusion`, which makes the ranked list)."""

    stage: str
    rank_before: int | None
    score_before: float | None
    rank_after: int
    score_after: float


@dataclass(frozen=True)
class Explanation:
    """Why a search's results rank where they do: the query's class and each stage's run."""

    query_class: str
    stages: tuple[StageRun, ...]


def effects(trace: Trace, key: Key) -> list[StageEffect]:
    """The stages' effects on the row `key`, in the order they ran."""
    out: list[StageEffect] = []
    before: tuple[int, float] | None = None
    for name, places in trace.places:
        after = places.get(key)
        if after is None:  # not a row of that stage's list
            before = None
            continue
        out.append(
            StageEffect(
                name,
                before[0] if before else None,
                before[1] if before else None,
                after[0],
                after[1],
            )
        )
        before = after
    return out


def _skipped(name: StageName, trace: Trace | None) -> None:
    if trace is not None:
        trace.runs.append(StageRun(name, False, "skipped by the request"))


def _sorted(items: list[Fused]) -> list[Fused]:
    return sorted(items, key=score_order)


def rank(
    lists: Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]],
    plan: FusionPlan,
    trace: Trace | None = None,
) -> list[Fused]:
    """Every store's streams, ranked by the stages of `STAGES` in order, best first."""

    def runs(name: StageName) -> bool:
        if name in plan.skip:
            _skipped(name, trace)
            return False
        return True

    def note(
        name: StageName, applied: bool, detail: str, items: Sequence[Fused] | None = None
    ) -> None:
        if trace is not None:
            trace.ran(name, applied, detail, items)

    # Each stream's lists over the stores as one ranking by raw score (fusion.merge_lists).
    names = [name for name in STREAM_NAMES if any(name in s for s in lists.values())]
    streams: dict[StreamName, Sequence[StreamHit]] = {
        name: merge_lists([s[name] for s in lists.values() if name in s]) for name in names
    }
    vector_order = streams.get("vector", [])

    if runs("name_words"):
        empty = "symbol" in streams and not streams["symbol"]
        named = name_word_hits(streams, plan.name_words) if plan.name_words and empty else []
        if named:
            streams["symbol"] = named
        note(
            "name_words",
            bool(named),
            f"symbol stream filled with {len(named)} members"
            if named
            else "not a question in words"
            if not plan.name_words
            else "the symbol stream matched a name"
            if not empty
            else "no member's name uses the question's words",
        )

    if runs("shared_summaries"):
        moved = 0
        for name in list(streams):
            if name == "symbol":  # the symbol stream ranks names, not summaries
                continue
            shared = share_summaries(streams[name])
            moved += sum(1 for a, b in zip(streams[name], shared, strict=True) if a != b)
            streams[name] = shared
        note("shared_summaries", moved > 0, f"{moved} places given to overloads' code")

    items = fuse(streams, plan.k, plan.cap, plan.stream_weights, plan.doc_stream_weights)
    weights = ", ".join(
        f"{name} {plan.stream_weights.get(name, 1.0):g}" for name in STREAM_NAMES if name in streams
    )
    note("fusion", True, f"{plan.query_class} question: {weights}", items)

    if runs("containment"):
        before = len(items)
        items = collapse(
            # Named nodes first, as their group's evidence: containment keeps a node the
            # query names whatever it contains, and a tie in a group goes to the earlier row.
            sorted(items, key=_named_first),
            plan.k,
            plan.stream_weights,
            plan.layer_weights,
            prefer=plan.containment,
            fold=plan.fold,
            class_lines=plan.class_lines,
            type_names=plan.type_names,
            subject_names=plan.subject_names,
        )
        items = _sorted(items)
        folded = before - len(items)
        note("containment", folded > 0, f"{folded} rows folded into another", items)

    if runs("layer_weights"):
        _weigh(items, lambda item: plan.layer_weights.get(item.unit, 1.0))
        applied = bool(plan.layer_weights) and any(w != 1.0 for w in plan.layer_weights.values())
        items = _sorted(items)
        described = ", ".join(f"{unit} {w:g}" for unit, w in sorted(plan.layer_weights.items()))
        note("layer_weights", applied, described or "no layer weights set", items)

    if runs("test_code"):
        tests = _weigh(items, lambda item: plan.test_weight if _is_test(item) else 1.0)
        items = _sorted(items)
        applied = tests > 0 and plan.test_weight != 1.0
        note("test_code", applied, f"{tests} rows of test code times {plan.test_weight:g}", items)

    if runs("pin"):
        pinned = 0
        for item in items:
            if item.exact:
                item.score += PIN_SCORE * item.exact
                pinned += 1
        items = sorted(items, key=_named_first)
        note("pin", pinned > 0, f"{pinned} exact names first", items)

    if runs("overload_order"):
        if plan.order_overloads_by_code:
            ordered = order_by_code(items, vector_order)
            moved = sum(1 for a, b in zip(items, ordered, strict=True) if a is not b)
            items = ordered
            note("overload_order", moved > 0, f"{moved} overloads reordered by code", items)
        else:
            note("overload_order", False, "a question that writes a name")
    return items


def _named_first(item: Fused) -> tuple[object, ...]:
    return (-item.exact, *score_order(item))


def _is_test(item: Fused) -> bool:
    """Code the indexer stored as test code (code_nodes.is_test, by cograph_text.paths)."""
    return item.store == "code" and item.span is not None and item.span.is_test


def _weigh(items: Sequence[Fused], weight: Callable[[Fused], float]) -> int:
    """Multiplies every item's score by its weight; how many weights were not 1."""
    changed = 0
    for item in items:
        w = weight(item)
        if w != 1.0:
            item.score *= w
            changed += 1
    return changed

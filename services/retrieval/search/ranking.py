"""From stream lists to one ranked list: the fusion a query gets, decided by its class.

`plan_fusion` reads the query's class (query_class.py) and the settings into a
`FusionPlan`; `rank` applies it: each stream's lists over the stores joined into one
ranking by raw score, overloads' summaries handed to the member the code ranks best
(overloads.py), weighted RRF (stream weights of the class), containment and layer folding
of code (containment.py), then the layer weights, test code weighed down, and documents
weighed down on code-shaped questions (identifier, signature); last, on prose questions,
the overloads of one name ordered among their places by their code (overloads.py). A prose
or mixed question whose symbol stream found no name written as code gets that stream from
the words it uses (name_words.py) before anything else. The
engine and the offline replay (bench/quality) both call `rank`, so what the harness sweeps
is what the service does.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

from retrieval.layers import Store, Unit
from retrieval.search.containment import Fold, collapse
from retrieval.search.fusion import (
    STREAM_NAMES,
    Fused,
    StreamHit,
    StreamName,
    fuse,
    merge_lists,
    merge_stores,
)
from retrieval.search.name_words import name_word_hits, question_words
from retrieval.search.overloads import order_by_code, share_summaries
from retrieval.search.query_class import QUERY_CLASSES, QueryClass, classify
from retrieval.search.query_text import subject_names, type_names
from retrieval.weights import parse_weights

# Test code by path: a tests/ or testing/ directory, test_*.py, *_test.go / *_test.py,
# *.test.js / *.spec.ts, *Test.java / *Tests.java.
_TEST_PATH = re.compile(
    r"(^|/)(tests?|testing|__tests__)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$"
    r"|Tests?\.java$"
)
CODE_SHAPED: frozenset[QueryClass] = frozenset({"identifier", "signature"})
Containment = Literal["off", "member", "better"] | float  # containment.Prefer, or off
# `adaptive`: for prose and mixed questions the member when it scores at least
# `member_ratio` times its container (what matched is usually the code inside; a module
# always gives way), the better ranked for identifier and signature questions (they name a
# node, container or member, and the streams rank it first).
ContainmentSetting = Literal["off", "member", "better", "adaptive"]
CONTAINMENT_SETTINGS: tuple[ContainmentSetting, ...] = ("adaptive", "member", "better", "off")
# Under the member ratio, a class of at most this many lines ranked above its best member
# stays on its own evidence (containment.py, "Small classes"; bench/notes/quality-unseen.md,
# "Small classes stay").
DEFAULT_CLASS_LINES = 200


def containment_for(
    setting: ContainmentSetting, query_class: QueryClass, member_ratio: float = 0.0
) -> Containment:
    if setting != "adaptive":
        return setting
    return "better" if query_class in CODE_SHAPED else member_ratio


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


@dataclass(frozen=True)
class FusionPlan:
    """How one query's streams are fused."""

    k: int
    cap: int
    query_class: QueryClass = "prose"
    stream_weights: Mapping[StreamName, float] = field(default_factory=dict)
    # Document rows' stream weights (None: the same as code's).
    doc_stream_weights: Mapping[StreamName, float] | None = None
    layer_weights: Mapping[Unit, float] = field(default_factory=dict)
    containment: Containment = "member"  # which of a container and its member stays
    fold: Fold = "max"  # how the one that stays scores (containment.py)
    class_lines: int = 0  # under a member ratio, a class this small may stay (0: never)
    type_names: frozenset[str] = frozenset()  # classes the question calls a type
    subject_names: frozenset[str] = frozenset()  # the name written as code it opens with
    test_weight: float = 1.0  # multiplies the score of code under a test path
    doc_weight: float = 1.0  # multiplies documents' scores (code-shaped questions only)
    share_overload_summaries: bool = True  # overloads.py
    order_overloads_by_code: bool = False  # overloads.order_by_code (prose and mixed)
    # The question's words (name_words.py): an empty symbol stream is filled from them.
    name_words: frozenset[str] = frozenset()
    joint_stores: bool = True  # one ranking per stream across stores (else RRF per store)


@dataclass(frozen=True)
class FusionSettings:
    """The settings `plan_fusion` reads (RETRIEVAL_STREAM_WEIGHTS and neighbours)."""

    stream_weights: Mapping[QueryClass, Mapping[StreamName, float]] = field(default_factory=dict)
    # Per query class, the weights document rows fuse with (a class not named: the code's).
    doc_stream_weights: Mapping[QueryClass, Mapping[StreamName, float]] = field(
        default_factory=dict
    )
    containment: ContainmentSetting = "adaptive"
    fold: Fold = "max"
    # adaptive, prose and mixed questions: a container gives way to its member when the
    # member scores at least this times as well (0: always, the most specific).
    member_ratio: float = 0.5
    class_lines: int = DEFAULT_CLASS_LINES  # 0: a class always gives way under the ratio
    test_weight: float = 1.0
    code_query_doc_weight: float = 1.0
    share_overload_summaries: bool = True
    order_overloads_by_code: bool = True
    joint_stores: bool = True
    name_words: bool = True  # name_words.py, on prose and mixed questions


def plan_fusion(
    text: str,
    k: int,
    cap: int,
    settings: FusionSettings,
    layer_weights: Mapping[Unit, float] | None = None,
) -> FusionPlan:
    query_class = classify(text)
    containment = containment_for(settings.containment, query_class, settings.member_ratio)
    # Prose naming a class ("the FastTimer class", "MockPool provides ...") asks for the
    # class: read under the member ratio only, as the small-class rule
    # (bench/notes/quality-unseen.md, "Small classes stay").
    ratio = not isinstance(containment, str)
    return FusionPlan(
        k=k,
        cap=cap,
        query_class=query_class,
        stream_weights=settings.stream_weights.get(query_class, {}),
        doc_stream_weights=settings.doc_stream_weights.get(query_class),
        layer_weights=layer_weights or {},
        containment=containment,
        fold=settings.fold,
        class_lines=settings.class_lines,
        type_names=type_names(text) if ratio else frozenset(),
        subject_names=subject_names(text) if ratio else frozenset(),
        test_weight=settings.test_weight,
        doc_weight=settings.code_query_doc_weight if query_class in CODE_SHAPED else 1.0,
        share_overload_summaries=settings.share_overload_summaries,
        # Identifier and signature questions name the member (a parameter list tells
        # overloads apart); prose names the group.
        order_overloads_by_code=settings.order_overloads_by_code and query_class not in CODE_SHAPED,
        joint_stores=settings.joint_stores,
        # Identifier and signature questions write the name; the symbol stream's trigram
        # match is theirs.
        name_words=question_words(text)
        if settings.name_words and query_class not in CODE_SHAPED
        else frozenset(),
    )


def rank(
    lists: Mapping[Store, Mapping[StreamName, Sequence[StreamHit]]], plan: FusionPlan
) -> list[Fused]:
    """Every store's streams fused, folded and merged, best first."""
    # Each stream's lists over the stores as one ranking: fused at once (joint_stores),
    # and the vector stream's order of the code for order_by_code.
    names = [name for name in STREAM_NAMES if any(name in s for s in lists.values())]
    joined = {name: merge_lists([s[name] for s in lists.values() if name in s]) for name in names}
    batches: list[Mapping[StreamName, Sequence[StreamHit]]]
    batches = [joined] if plan.joint_stores else list(lists.values())
    per_batch: list[list[Fused]] = []
    for streams in batches:
        if plan.name_words and "symbol" in streams and not streams["symbol"]:
            # The symbol stream ran and matched no name written as code.
            named = name_word_hits(streams, plan.name_words)
            if named:
                streams = {**streams, "symbol": named}  # noqa: PLW2901 - filled, not replaced
        if plan.share_overload_summaries:
            # The symbol stream ranks names, not summaries: nothing to share there.
            streams = {  # noqa: PLW2901 - the same lists, overloads' summaries moved
                name: share_summaries(hits) if name != "symbol" else hits
                for name, hits in streams.items()
            }
        fused = fuse(streams, plan.k, plan.cap, plan.stream_weights, plan.doc_stream_weights)
        if plan.containment != "off":
            # Only code has spans; documents pass through unchanged.
            fused = collapse(
                fused,
                plan.k,
                plan.stream_weights,
                plan.layer_weights,
                prefer=plan.containment,
                fold=plan.fold,
                class_lines=plan.class_lines,
                type_names=plan.type_names,
                subject_names=plan.subject_names,
            )
        per_batch.append(fused)

    def weight(item: Fused) -> float:
        if item.store == "code":
            if item.span is not None and is_test_path(item.span.path):
                return plan.test_weight
            return 1.0
        return plan.doc_weight if item.store == "repo_docs" else 1.0

    merged = merge_stores(per_batch, plan.layer_weights, weight)
    if plan.order_overloads_by_code:
        merged = order_by_code(merged, joined.get("vector", []))
    return merged


STREAM_WEIGHT_MIN, STREAM_WEIGHT_MAX = 0.0, 5.0
# Tuned on the tuning half of bench/quality (bench/notes/quality-unseen.md, "Query-adaptive
# fusion").
# Prose and mixed questions: the lexical stream matches common words and the symbol stream
# near names, both weak evidence there; the vector stream leads.
DEFAULT_STREAM_WEIGHTS = "prose:lexical=0.35,symbol=0.5;mixed:lexical=0.35,symbol=0.5"
# Documents' own words are what a question about them repeats: on prose and mixed questions
# their lexical stream weighs twice the code's (bench/notes/quality-unseen.md, "Small classes
# stay", "Documents weigh their words", tuned on the tuning half).
DEFAULT_DOC_STREAM_WEIGHTS = "prose:lexical=0.7,symbol=0.5;mixed:lexical=0.7,symbol=0.5"
DEFAULT_TEST_WEIGHT = 0.5  # bench/notes/quality-unseen.md, "What crowds the top"
# Tuned on the tuning half (bench/notes/quality-unseen.md, "Containment").
DEFAULT_MEMBER_RATIO = 0.5
DEFAULT_CODE_QUERY_DOC_WEIGHT = 1.0


def parse_stream_weights(text: str) -> dict[QueryClass, dict[StreamName, float]]:
    """`prose:vector=1.5,lexical=0.5;mixed:lexical=0.8` -> per class, per stream weights
    (a stream not named weighs 1); raises ValueError saying what is wrong."""
    out: dict[QueryClass, dict[StreamName, float]] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, sep, rest = part.partition(":")
        klass = name.strip()
        if not sep or klass not in QUERY_CLASSES:
            raise ValueError(
                f"{part!r} must be CLASS:STREAM=WEIGHT,... with CLASS one of "
                f"{', '.join(QUERY_CLASSES)}"
            )
        named = parse_weights(
            rest,
            STREAM_NAMES,
            label="STREAM",
            noun="a stream weight",
            low=STREAM_WEIGHT_MIN,
            high=STREAM_WEIGHT_MAX,
        )
        weights = cast(dict[StreamName, float], named)
        out[klass] = weights
    return out


def default_fusion() -> FusionSettings:
    """The fusion settings a service gets when none is set."""
    return FusionSettings(
        stream_weights=parse_stream_weights(DEFAULT_STREAM_WEIGHTS),
        doc_stream_weights=parse_stream_weights(DEFAULT_DOC_STREAM_WEIGHTS),
        containment="adaptive",
        member_ratio=DEFAULT_MEMBER_RATIO,
        class_lines=DEFAULT_CLASS_LINES,
        test_weight=DEFAULT_TEST_WEIGHT,
        code_query_doc_weight=DEFAULT_CODE_QUERY_DOC_WEIGHT,
        share_overload_summaries=True,
        order_overloads_by_code=True,
        joint_stores=True,
    )

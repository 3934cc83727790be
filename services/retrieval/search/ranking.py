"""How one query is ranked: its class, and the settings that shape each pipeline stage.

`plan_fusion` reads the query's class (query_class.py), the settings and the stages the
request skips into a `FusionPlan`; `pipeline.rank` runs the stages with it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from retrieval.layers import Unit
from retrieval.search.containment import Fold, Prefer
from retrieval.search.fusion import STREAM_NAMES, StreamName
from retrieval.search.name_words import question_words
from retrieval.search.query_class import QUERY_CLASSES, QueryClass, classify
from retrieval.search.query_text import subject_names, type_names
from retrieval.weights import parse_weights

CODE_SHAPED: frozenset[QueryClass] = frozenset({"identifier", "signature"})
# `adaptive` (the service's): for prose and mixed questions the member when it scores at
# least `member_ratio` times its container (what matched is usually the code inside; a
# module always gives way), the better ranked for identifier and signature questions (they
# name a node, container or member, and the streams rank it first). The others are the
# fixed policies it was measured against (bench/quality/fusion_sweep.py); `off` skips the
# containment stage.
ContainmentSetting = Literal["off", "member", "better", "adaptive"]
CONTAINMENT_SETTINGS: tuple[ContainmentSetting, ...] = ("adaptive", "member", "better", "off")
# Under the member ratio, a class of at most this many lines ranked above its best member
# stays on its own evidence (containment.py, "Small classes"; bench/notes/quality-unseen.md,
# "Small classes stay").
DEFAULT_CLASS_LINES = 200


def containment_for(
    setting: ContainmentSetting, query_class: QueryClass, member_ratio: float = 0.0
) -> Prefer:
    if setting in ("member", "better"):
        return cast(Prefer, setting)
    return "better" if query_class in CODE_SHAPED else member_ratio


@dataclass(frozen=True)
class FusionPlan:
    """How one query is ranked (pipeline.rank)."""

    k: int
    cap: int
    query_class: QueryClass = "prose"
    stream_weights: Mapping[StreamName, float] = field(default_factory=dict)
    # Document rows' stream weights (None: the same as code's).
    doc_stream_weights: Mapping[StreamName, float] | None = None
    layer_weights: Mapping[Unit, float] = field(default_factory=dict)
    containment: Prefer = "member"  # which of a container and its member stays
    fold: Fold = "max"  # how the one that stays scores (containment.py)
    class_lines: int = 0  # under a member ratio, a class this small may stay (0: never)
    type_names: frozenset[str] = frozenset()  # classes the question calls a type
    subject_names: frozenset[str] = frozenset()  # the name written as code it opens with
    test_weight: float = 1.0  # multiplies the score of code under a test path
    order_overloads_by_code: bool = False  # overloads.order_by_code (prose and mixed)
    # The question's words (name_words.py): an empty symbol stream is filled from them.
    name_words: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()  # pipeline stages this request skips


@dataclass(frozen=True)
class FusionSettings:
    """The settings `plan_fusion` reads (RETRIEVAL_STREAM_WEIGHTS and neighbours)."""

    stream_weights: Mapping[QueryClass, Mapping[StreamName, float]] = field(default_factory=dict)
    # Per query class, the weights document rows fuse with (a class not named: the code's).
    doc_stream_weights: Mapping[QueryClass, Mapping[StreamName, float]] = field(
        default_factory=dict
    )
    # Not settings of the service (always `adaptive` and `max` there): the policies the
    # offline sweep compares (bench/quality/fusion_sweep.py).
    containment: ContainmentSetting = "adaptive"
    fold: Fold = "max"
    # adaptive, prose and mixed questions: a container gives way to its member when the
    # member scores at least this times as well (0: always, the most specific).
    member_ratio: float = 0.5
    class_lines: int = DEFAULT_CLASS_LINES  # 0: a class always gives way under the ratio
    test_weight: float = 1.0


def plan_fusion(
    text: str,
    k: int,
    cap: int,
    settings: FusionSettings,
    layer_weights: Mapping[Unit, float] | None = None,
    *,
    skip: frozenset[str] = frozenset(),
) -> FusionPlan:
    query_class = classify(text)
    containment = containment_for(settings.containment, query_class, settings.member_ratio)
    if settings.containment == "off":
        skip = skip | {"containment"}
    # Prose naming a class ("the FastTimer class", "MockPool provides ...") asks for the
    # class: read under the member ratio only, as the small-class rule
    # (bench/notes/quality-unseen.md, "Small classes stay").
    ratio = not isinstance(containment, str)
    code_shaped = query_class in CODE_SHAPED
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
        # Identifier and signature questions name the member (a parameter list tells
        # overloads apart); prose names the group.
        order_overloads_by_code=not code_shaped,
        # Identifier and signature questions write the name; the symbol stream's trigram
        # match is theirs.
        name_words=frozenset() if code_shaped else question_words(text),
        skip=skip,
    )


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
        member_ratio=DEFAULT_MEMBER_RATIO,
        class_lines=DEFAULT_CLASS_LINES,
        test_weight=DEFAULT_TEST_WEIGHT,
    )

"""How far a search result can be trusted, and whether an answer holds a good one at all.

Fused scores do not say that: reciprocal rank fusion turns every list into ranks, so the
best of a hundred poor candidates scores exactly like the best of a hundred good ones, and
a query of random letters gets ten results that look like hits (the vector stream always
returns its nearest neighbours, however far they are). The evidence that does tell them
apart is what each stream said about the result:

- the symbol stream's verdict that the query names the node outright (`exact`);
- the vector stream's raw cosine similarity between the query and the result;
- how many streams rank it near the top of their lists: the vector stream, the lexical
  stream (which only finds text holding two of the query's terms, docs/adr/0007) and the
  symbol stream (a name like the query's). A random string has nearest neighbours in the
  vector stream and rarely anything else.

`grade` turns that into `high`, `medium` or `low` with the thresholds below, calibrated
with `python -m bench.quality.confidence` on the package sets' tuning half and checked on
their held-out half and on nonsense queries (bench/RESULTS.md, "Search confidence"). An
answer's `confidence` is its first result's; it has `no_good_answer` when no result is
above `low`.

Pure: no I/O, so each threshold's edge is unit-tested exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from retrieval.search.fusion import Provenance, StreamName

Confidence = Literal["low", "medium", "high"]
CONFIDENCES: tuple[Confidence, ...] = ("low", "medium", "high")

# The thresholds, tuned on the tuning half of `bench.quality`'s CI plan (306 questions) and
# 60 nonsense queries; bench/RESULTS.md, "Search confidence", has the figures
# of both halves.
#
# Cosine similarity (the packaged all-MiniLM-L6-v2, query against the indexed text) at or
# above which the vector stream's match alone makes a result high: 0.8 (the two wrong
# first results above it on the tuning half had the answer second).
HIGH_COSINE = 0.8
# ... and at least medium. No nonsense query came closer than 0.36 to anything; answers
# that were first lay above 0.45 unless another stream agreed.
MEDIUM_COSINE = 0.45
# A stream "agrees" on a result it ranks at or above this place: at 10, the tuning half's
# precision of high fell from 0.938 to 0.908 for 7 more questions called high.
AGREEMENT_RANK = 5
# Agreeing streams that make a result medium on their own, and high with a cosine of at
# least AGREED_HIGH_COSINE.
AGREEMENT_STREAMS = 2
AGREED_HIGH_COSINE = 0.6


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the streams said about one result."""

    exact: bool  # the symbol stream's verdict: the query is this node's name
    ranks: Mapping[StreamName, int]  # 1-based rank in each stream that found it
    scores: Mapping[StreamName, float]  # each such stream's raw score

    @classmethod
    def of(cls, provenance: Iterable[Provenance], exact: bool) -> Evidence:
        found = list(provenance)
        return cls(
            exact=exact,
            ranks={p.stream: p.rank for p in found},
            scores={p.stream: p.score for p in found},
        )

    def agreeing(self) -> int:
        """Streams that rank this result at or above AGREEMENT_RANK."""
        return sum(1 for rank in self.ranks.values() if rank <= AGREEMENT_RANK)


def grade(evidence: Evidence) -> Confidence:
    """`high`, `medium` or `low` for one result (the module doc says on what)."""
    cosine = evidence.scores.get("vector", 0.0)
    agreeing = evidence.agreeing()
    if evidence.exact or cosine >= HIGH_COSINE:
        return "high"
    if agreeing >= AGREEMENT_STREAMS and cosine >= AGREED_HIGH_COSINE:
        return "high"
    if cosine >= MEDIUM_COSINE or agreeing >= AGREEMENT_STREAMS:
        return "medium"
    return "low"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an answer says about itself: its first result's confidence (None with no
    results) and whether no result is above `low`."""

    confidence: Confidence | None
    no_good_answer: bool


def verdict(grades: Sequence[Confidence]) -> Verdict:
    """The answer's verdict from its results' grades, in rank order."""
    if not grades:
        return Verdict(None, True)
    return Verdict(grades[0], all(g == "low" for g in grades))

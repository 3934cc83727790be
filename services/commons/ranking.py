"""The ranking expression and the choice between exact and two-stage retrieval.

score = w_semantic * cosine_similarity + w_votes * ln(1 + max(votes, 0))
        - w_changed * [the note's code changed under it]

where the bracket is 1 for a note with anchors that are all body_changed,
signature_changed or orphaned (CHANGED_STATUSES), else 0; ties go to the higher vote score,
then the newer note. The SQL in store.py is the authority; `blended_score` mirrors it for
tests and the benchmark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

# The anchor statuses that sink a note when all of its anchors have one. Not `moved`: a
# moved anchor's code is the same body under another path or name, so the note still holds.
CHANGED_STATUSES = ("body_changed", "signature_changed", "orphaned")


@dataclass(frozen=True)
class RankingWeights:
    semantic: float = 1.0
    votes: float = 0.15
    # Subtracted from a note whose code changed under it: about one up-vote's worth
    # (0.15 * ln 2 = 0.104), so a changed note ranks below an equal fresh one and below a
    # slightly less similar one, yet a much closer match still comes first.
    changed_anchors: float = 0.1


class Strategy(StrEnum):
    # Every embedded note scored exactly: a blended ORDER BY cannot use the HNSW index.
    EXACT = "exact"
    # Top-K by pure cosine distance through the index, then the blended re-rank of those K.
    TWO_STAGE = "two_stage"
    # A selective quoted phrase on a big board: its few notes, found through the trigram
    # index, scored exactly (the exact SQL with another plan).
    FILTERED = "filtered"


def blended_score(
    similarity: float, votes: int, weights: RankingWeights, changed: bool = False
) -> float:
    return (
        weights.semantic * similarity
        + weights.votes * math.log(1 + max(votes, 0))
        - weights.changed_anchors * changed
    )


def choose_strategy(embedded_notes: int, threshold: int) -> Strategy:
    """Two-stage once the board is big enough that scoring every row costs real time."""
    return Strategy.TWO_STAGE if embedded_notes >= threshold else Strategy.EXACT


def ef_search_for(k: int) -> int:
    # HNSW returns at most ef_search rows; below K the candidate list silently shrinks.
    # pgvector caps ef_search at 1000.
    return min(max(k, 40), 1000)

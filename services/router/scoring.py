"""The routing score, as the formula below defines it; pure, so tests can check it by hand.

    idf(term)         = log((N + 1) / (df + 1))   if df >= 1, else 0
    weighted_coverage = sum idf(matched terms) / sum idf(query terms)   (0 if that sum is 0)
    label_boost       = 1 + 0.5 * matched label terms / query terms
    score             = min(1, weighted_coverage * label_boost)

N and df count only the sources of one pool that the caller may read.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence


def idf(n: int, df: int) -> float:
    """A term nobody has (df == 0) is evidence about nothing: it weighs 0, not the maximum.

    Otherwise a typo would dominate the denominator and sink every relevant source.
    """
    if df < 1:
        return 0.0
    return math.log((n + 1) / (df + 1))


def score(
    query_terms: Sequence[str],
    n: int,
    df: Mapping[str, int],
    matched: Collection[str],
    label_matched: Collection[str],
) -> float:
    """The score of one source; `matched` and `label_matched` are subsets of query_terms."""
    if not query_terms:
        return 0.0
    weights = {term: idf(n, df.get(term, 0)) for term in query_terms}
    total = sum(weights.values())
    coverage = sum(weights[t] for t in set(matched) if t in weights) / total if total > 0 else 0.0
    labels = sum(1 for t in set(label_matched) if t in weights)
    boost = 1.0 + 0.5 * labels / len(query_terms)
    return min(1.0, coverage * boost)

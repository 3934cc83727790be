"""Ranking metrics over queries with one known answer each. Pure: no I/O.

Every query in the harness has exactly one answer (a definition node, or one markdown
section), so a query's outcome is the 1-based rank at which the answer first appears, or
None. The usual metrics then reduce to closed forms:

- MRR@k: 1/rank when rank <= k, else 0;
- Recall@k: 1 when rank <= k, else 0 (one relevant item, so recall is a hit rate);
- nDCG@k with binary relevance: DCG = 1/log2(rank + 1), the ideal DCG is 1 (the answer
  at rank 1), so nDCG = 1/log2(rank + 1) when rank <= k, else 0.

Several rows can match the same answer (a node returned at the code and ast_summary
layers, a long section split into chunks): only the first counts, which is what a reader
scanning the list experiences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

RECALL_KS: tuple[int, ...] = (1, 5, 10)
CUTOFF = 10


def first_rank(ranked: Sequence[T], is_answer: Callable[[T], bool]) -> int | None:
    """1-based rank of the first item that matches the answer, or None."""
    for index, item in enumerate(ranked, start=1):
        if is_answer(item):
            return index
    return None


def reciprocal_rank(rank: int | None, k: int = CUTOFF) -> float:
    return 1.0 / rank if rank is not None and rank <= k else 0.0


def recall(rank: int | None, k: int) -> float:
    return 1.0 if rank is not None and rank <= k else 0.0


def ndcg(rank: int | None, k: int = CUTOFF) -> float:
    return 1.0 / math.log2(rank + 1) if rank is not None and rank <= k else 0.0


@dataclass(frozen=True, slots=True)
class Scores:
    """Mean metrics over a set of queries."""

    count: int
    mrr10: float
    recall1: float
    recall5: float
    recall10: float
    ndcg10: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "mrr@10": self.mrr10,
            "recall@1": self.recall1,
            "recall@5": self.recall5,
            "recall@10": self.recall10,
            "ndcg@10": self.ndcg10,
        }


def score(ranks: Iterable[int | None]) -> Scores:
    """Means over the ranks of a query set; an empty set scores zero (count says so)."""
    values = list(ranks)
    n = len(values)
    if n == 0:
        return Scores(0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def mean(metric: Callable[[int | None], float]) -> float:
        return math.fsum(metric(rank) for rank in values) / n

    return Scores(
        count=n,
        mrr10=mean(reciprocal_rank),
        recall1=mean(lambda r: recall(r, 1)),
        recall5=mean(lambda r: recall(r, 5)),
        recall10=mean(lambda r: recall(r, 10)),
        ndcg10=mean(ndcg),
    )


def approx_tokens(chars: int) -> float:
    """Tokens approximated as characters / 4 (the usual rule of thumb for English and
    code with BPE tokenizers; no tokenizer is loaded so the number is model-independent)."""
    return chars / 4.0

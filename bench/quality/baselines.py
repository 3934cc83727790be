"""Baselines computed outside the service, over the same candidates and queries. Pure.

- dense: cosine between the query's vector and each candidate's vector (vectors computed
  elsewhere, from the candidate's raw source), exact, over every candidate;
- BM25 (Okapi, k1 1.2, b 0.75) over identifier-split tokens: `parseConfig` and
  `parse_config` both give `parse`, `config` (and the whole identifier, lower-cased);
- RRF of dense and BM25 with k = 60 (plain reciprocal rank fusion, equal weights), the
  hybrid that most retrieval libraries ship.

Rankings are lists of candidate indices, best first; ties are broken by index so a run
is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from cograph_text.identifiers import identifier_parts

BM25_K1 = 1.2
BM25_B = 0.75
RRF_K = 60

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[0-9]+")


def tokens(text: str) -> list[str]:
    """Identifier-split (as the service splits: cograph_text.identifiers), lower-cased
    tokens of the ASCII words; a compound identifier also keeps itself."""
    out: list[str] = []
    for word in _WORD.findall(text):
        parts = identifier_parts(word)
        out.extend(parts)
        whole = word.lower().strip("_")
        if len(parts) > 1 and whole:
            out.append(whole)
    return out


class BM25:
    """Okapi BM25 over pre-tokenised documents."""

    def __init__(self, documents: Iterable[Sequence[str]], k1: float = BM25_K1, b: float = BM25_B):
        self.k1, self.b = k1, b
        self._tf: list[Counter[str]] = [Counter(doc) for doc in documents]
        self._len = [sum(tf.values()) for tf in self._tf]
        n = len(self._tf)
        self._avg = (sum(self._len) / n) if n else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        # The Lucene form of idf: always positive, so a common term never subtracts.
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self._postings: dict[str, list[tuple[int, int]]] = {}
        for i, tf in enumerate(self._tf):
            for term, f in tf.items():
                self._postings.setdefault(term, []).append((i, f))

    def __len__(self) -> int:
        return len(self._tf)

    def scores(self, query: Sequence[str]) -> list[float]:
        out = [0.0] * len(self._tf)
        for term in dict.fromkeys(query):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for i, f in self._postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self._len[i] / (self._avg or 1.0))
                out[i] += idf * f * (self.k1 + 1) / (f + norm)
        return out

    def rank(self, query: Sequence[str], limit: int | None = None) -> list[int]:
        """Candidates with a positive score, best first (ties by index)."""
        scored = [(s, i) for i, s in enumerate(self.scores(query)) if s > 0]
        scored.sort(key=lambda item: (-item[0], item[1]))
        ranked = [i for _, i in scored]
        return ranked[:limit] if limit is not None else ranked


def dense_rank(
    query: npt.NDArray[np.float32], matrix: npt.NDArray[np.float32], limit: int | None = None
) -> list[int]:
    """Candidates by exact cosine to the query (rows of `matrix` are unit vectors), best
    first; a stable sort keeps ties in index order."""
    if matrix.shape[0] == 0:
        return []
    sims = matrix @ query
    order = np.argsort(-sims, kind="stable")
    ranked = [int(i) for i in order]
    return ranked[:limit] if limit is not None else ranked


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K, limit: int | None = None) -> list[int]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over the rankings (rank 1-based)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    order = sorted(fused, key=lambda item: (-fused[item], item))
    return order[:limit] if limit is not None else order

"""Reciprocal Rank Fusion (Cormack et al., 2009) over the streams of a search.

score(candidate) = sum over streams of 1 / (k + rank_in_stream), ranks 1-based, each stream
truncated to the candidate cap first. Ranks are comparable across streams where the raw
scores (cosine, BM25, trigram similarity) are not. Within one stream the raw scores
are comparable, so a stream's lists over several units or stores are first merged into one
ranking by raw score (`merge_lists`): a node body, a summary and a markdown section compete
on the same cosine. (Fusing each store apart and interleaving the stores on the fused score
gave every store's first hit the same score, so a question about code always had a document
between each pair of code results: bench/notes/quality-unseen.md, "One ranking per stream
across stores".)

One deliberate addition to plain RRF: an exact symbol match (the query *is* the node's
name or qualified name, as the symbol stream reports it) is placed ahead of everything else,
one that agrees in case ahead of one that agrees only ignoring case, in fused order among
themselves. "ParseConfig at position one" for the query `ParseConfig` is already the
state the rerank gate refuses to disturb; with plain RRF a rank-1 symbol hit is worth only
1/(k+1) and a node ranked second by two other streams overtakes it (the evaluation measured
symbol-query MRR 0.88 for the symbol stream alone and 0.79 fused). Pinning exact matches
makes fusion at least as good as the symbol stream on exact queries.

Pure: no I/O, so the arithmetic and the tie order are unit-tested exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from retrieval.layers import STORE_ORDER, UNIT_ORDER, Store, Unit

StreamName = Literal["vector", "lexical", "symbol"]
STREAM_NAMES: tuple[StreamName, ...] = ("vector", "lexical", "symbol")
_STREAM_ORDER = {name: i for i, name in enumerate(STREAM_NAMES)}


# Added per exact-match level to a pinned result's score. Above any weighted RRF score the
# settings allow: weights that could reach it are refused at start
# (SearchSettings.highest_fused_score).
PIN_SCORE = 1000.0


@dataclass(frozen=True, slots=True)
class Span:
    """Where a code node lies: its repository, file and line range (1-based, inclusive).
    One node contains another when both lie in the same file and its range covers the
    other's (a module covers its file, a class its methods)."""

    repository_id: int
    path: str
    start_line: int
    end_line: int
    kind: str = ""  # module, class, function, ...
    qualified_name: str = ""  # `#N` marks a repeated name in one file (overloads)
    is_test: bool = False  # test code, as the indexer classed it (code_nodes.is_test)

    @property
    def is_container(self) -> bool:
        """A module, class or other kind that holds members."""
        return self.kind in _CONTAINER_RANK

    def covers(self, other: Span) -> bool:
        """A wider range in the same file; on the same range, a container kind over a
        member kind (a module that is one function, a class that is one method)."""
        if (self.repository_id, self.path) != (other.repository_id, other.path):
            return False
        if (self.start_line, self.end_line) == (other.start_line, other.end_line):
            return _CONTAINER_RANK.get(self.kind, 0) > _CONTAINER_RANK.get(other.kind, 0)
        return self.start_line <= other.start_line and other.end_line <= self.end_line


_CONTAINER_RANK = {
    "module": 2,
    **dict.fromkeys(("class", "struct", "interface", "trait", "impl", "enum"), 1),
}


# Where a row lies (its owner, path, lines, and for code its qualified name; search_sql):
# ties in score fall through to it, then to the id. Ids follow the order an index run's
# workers happened to write in, so breaking ties on them alone would let two indexings of
# the same text answer the same question in different orders.
Place = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class StreamHit:
    """One candidate of one stream: the unit it ranks, the row id and the raw score."""

    unit: Unit
    id: int
    score: float
    # The symbol stream's verdict: 2, the query is this node's name or qualified name as
    # written; 1, the same ignoring case; 0, neither.
    exact: int = 0
    span: Span | None = None  # code nodes: where the node lies (containment, test paths)
    store: Store = "code"  # the store the row lives in (ids are per store)
    place: Place = ()


def merge_lists(lists: Sequence[Sequence[StreamHit]]) -> list[StreamHit]:
    """One stream's lists (over several units or stores) as one ranking by raw score: the
    lists share a scale (cosines of one model, or BM25 over one corpus), ties on place, then id.
    Exact symbol matches keep the lead the symbol stream gave them."""
    merged = [hit for hits in lists for hit in hits]
    merged.sort(
        key=lambda hit: (
            -hit.exact,
            -hit.score,
            hit.place,
            hit.id,
            STORE_ORDER[hit.store],
            UNIT_ORDER[hit.unit],
        )
    )
    return merged


@dataclass(frozen=True, slots=True)
class Provenance:
    stream: StreamName
    rank: int  # 1-based, within the stream's list
    score: float  # the stream's raw score


@dataclass(slots=True)
class Fused:
    store: Store
    unit: Unit
    id: int
    score: float
    provenance: list[Provenance] = field(default_factory=list)
    exact: int = 0
    span: Span | None = None
    place: Place = ()

    def raw(self, stream: StreamName) -> float | None:
        """The raw score of `stream`, or None when that stream did not find this unit."""
        for item in self.provenance:
            if item.stream == stream:
                return item.score
        return None

    @property
    def streams(self) -> frozenset[StreamName]:
        return frozenset(item.stream for item in self.provenance)


def fuse(
    streams: Mapping[StreamName, Sequence[StreamHit]],
    k: int,
    cap: int,
    stream_weights: Mapping[StreamName, float] | None = None,
    doc_stream_weights: Mapping[StreamName, float] | None = None,
) -> list[Fused]:
    """RRF over the streams' lists; best first, ties broken on place, then row id (then
    store, unit).

    Each list must already be ordered best first; a unit listed twice in one stream keeps
    its first (best) rank. With `stream_weights` a stream's contribution is its weight
    times 1/(k + rank) (weighted RRF; 1 for a stream not named); document rows (every
    store but code) weigh theirs by `doc_stream_weights` when given and more than one
    stream is fused.
    """
    if k < 1 or cap < 1:
        raise ValueError("k and cap must be positive")
    found: dict[tuple[Store, Unit, int], Fused] = {}
    for name in sorted(streams, key=_STREAM_ORDER.__getitem__):
        seen: set[tuple[Store, Unit, int]] = set()
        rank = 0
        for hit in streams[name]:
            key = (hit.store, hit.unit, hit.id)
            if key in seen:
                continue
            if rank == cap:
                break
            seen.add(key)
            rank += 1
            fused = found.get(key)
            if fused is None:
                fused = found[key] = Fused(hit.store, hit.unit, hit.id, 0.0, place=hit.place)
            fused.provenance.append(Provenance(name, rank, hit.score))
            fused.exact = max(fused.exact, hit.exact)
            if fused.span is None:
                fused.span = hit.span
    # Weights balance streams: a stream alone keeps its own order across stores.
    by_store = doc_stream_weights is not None and len(streams) > 1
    for fused in found.values():
        weights = doc_stream_weights if by_store and fused.store != "code" else stream_weights
        fused.score = rrf_score(fused.provenance, k, weights)
    return sorted(found.values(), key=score_order)


def rrf_score(
    provenance: Sequence[Provenance], k: int, stream_weights: Mapping[StreamName, float] | None
) -> float:
    """sum of weight(stream) / (k + rank). fsum is exactly rounded, so equal rank multisets
    give bit-equal scores whatever the stream order: ties stay ties and fall through to
    the row's place."""
    weights = stream_weights or {}
    return math.fsum(weights.get(item.stream, 1.0) / (k + item.rank) for item in provenance)


def score_order(item: Fused) -> tuple[float, Place, int, int, int]:
    """Best score first; ties on the row's place, then id, store and unit (a total order, so
    two indexings of the same text rank alike). Exact names are placed by the pipeline's
    `pin` stage, not here."""
    return (-item.score, item.place, item.id, STORE_ORDER[item.store], UNIT_ORDER[item.unit])

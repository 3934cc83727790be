"""The route use case: validate, tokenise, query both pools, score, rank, explain."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from cograph_api.access_rules import Viewer
from cograph_api.limits import ROUTE_RESULTS_MIN
from router.rationale import describe, describe_collection
from router.scoring import score
from router.store import RANK_DIGITS, PoolMatches, SourceStore
from router.terms import QueryTerm, query_terms
from svckit.errors import InvalidArgument


@dataclass(frozen=True)
class RouteLimits:
    default_repositories: int
    default_collections: int
    max_results: int  # per pool, inclusive; 1 is the minimum
    max_query_chars: int
    max_query_terms: int  # terms past this are ignored (each one is an index lookup)
    weak_threshold: float  # collections scoring below it are marked (weak/fallback)


@dataclass(frozen=True)
class RoutedSource:
    name: str  # slug for a repository, name for a collection
    confidence: float
    rationale: str


@dataclass(frozen=True)
class Routing:
    repositories: list[RoutedSource]
    collections: list[RoutedSource]


@dataclass(frozen=True)
class RouteQuery:
    terms: list[QueryTerm]
    max_repositories: int
    max_collections: int


def validate(
    limits: RouteLimits, query: str, max_repositories: int | None, max_collections: int | None
) -> RouteQuery:
    """Rejects what the service will not do with INVALID_ARGUMENT; fills in defaults."""
    if not query.strip():
        raise InvalidArgument("query must not be blank")
    if len(query) > limits.max_query_chars:
        raise InvalidArgument(
            f"query: must be at most {limits.max_query_chars} characters (got {len(query)})"
        )
    counts = []
    for name, value, default in (
        ("max_repositories", max_repositories, limits.default_repositories),
        ("max_collections", max_collections, limits.default_collections),
    ):
        if value is None:
            counts.append(default)
        elif not ROUTE_RESULTS_MIN <= value <= limits.max_results:
            raise InvalidArgument(
                f"{name}: must be between {ROUTE_RESULTS_MIN} and {limits.max_results}"
            )
        else:
            counts.append(value)
    return RouteQuery(query_terms(query, limits.max_query_terms), counts[0], counts[1])


def _rank(
    terms: Sequence[str], pool: PoolMatches
) -> list[tuple[float, str, dict[str, frozenset[str]]]]:
    ranked = []
    for name, matched in pool.matches.items():
        labels = [t for t, fields in matched.items() if "label" in fields]
        value = score(terms, pool.population, pool.document_frequency, matched, labels)
        ranked.append((value, name, matched))
    # Ties: more matched terms first, then the name, so answers are stable across calls; the
    # rounding is the one the SQL orders by, so both see the same ties.
    ranked.sort(key=lambda item: (-round(item[0], RANK_DIGITS), -len(item[2]), item[1]))
    return ranked


class Router:
    def __init__(self, store: SourceStore, limits: RouteLimits) -> None:
        self._store = store
        self._limits = limits

    async def route(
        self,
        query: str,
        max_repositories: int | None = None,
        max_collections: int | None = None,
        viewer: Viewer | None = None,
    ) -> Routing:
        request = validate(self._limits, query, max_repositories, max_collections)
        who = viewer or Viewer.current()
        # Two pools, two connections, one round trip each, in parallel.
        repositories, collections = await asyncio.gather(
            self._store.repositories(who, request.terms, request.max_repositories),
            self._store.collections(who, request.terms, request.max_collections),
        )
        texts = [t.text for t in request.terms]
        routed_repositories = [
            RoutedSource(name, value, describe(texts, matched))
            for value, name, matched in _rank(texts, repositories)[: request.max_repositories]
        ]
        ranked_collections = _rank(texts, collections)
        ranked_collections += [(0.0, name, {}) for name in collections.fallback]
        threshold = self._limits.weak_threshold
        routed_collections = [
            RoutedSource(name, value, describe_collection(texts, matched, value, threshold))
            for value, name, matched in ranked_collections[: request.max_collections]
        ]
        return Routing(routed_repositories, routed_collections)

"""Routing from what earlier routes computed, exact as of the moment of each route.

At 10,000 repositories a common term ("config", "client") matches most of them, and
re-deriving N, df and the per-source scores from the postings on every route cost 50-200 ms
(bench/notes/routing.md, "Source routing"). Two things a route needs change rarely and are shared
by many routes: which sources match a term (the same for every principal) and which sources a
principal may read. This store keeps both per pool, as arrays over the pool's sources, and
does the rest (N, df, the scores, the top `limit`) with numpy.

Exactness: everything kept belongs to one version of the pool, the sum of the pool's rows in
router_versions (migrations/0002), which every committed change to the pool's sources,
grants, corpus entries or chunks raises. A route first reads that sum (one small statement);
if it equals the sum the kept state was read under, the state is exactly what the database
holds now, and the route answers from it. Otherwise the route reads what it lacks inside one
REPEATABLE READ transaction whose snapshot also gives the version, so a state never mixes two
versions, and a state is never used at any other version. In particular a revoked grant,
a deleted source or a source made private raises the version, so the next route re-reads
who may read what before answering.

The price: any change to a pool drops all it kept, and the next route reads the pool's
sources, the principal's readable set and its terms' matches again (at 10,000 repositories
about twice an uncached route).

Results are those of RouterStore (store.py), the reference this is tested against: the same
N, df, top sources (ties broken by the database's own name order, read from it) and matched
fields. Confidences are still computed by router.scoring in routing.py.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import asyncpg
import numpy as np
import numpy.typing as npt

from cograph_api.access_rules import Viewer, collection_readable, repository_readable
from router.scoring import idf
from router.store import (
    BODY_HITS,
    RANK_DIGITS,
    TOKEN_HITS,
    PoolMatches,
    database_errors,
    term_args,
    terms_cte,
)
from router.terms import QueryTerm

# A term's matches: per source (by position), the index of the set of fields it matched in,
# 0 for none. Sets are interned per state; far fewer distinct sets exist than 2**16.
Codes = npt.NDArray[np.uint16]
Mask = npt.NDArray[np.bool_]
MAX_FIELD_SETS = 2**16


@dataclass(frozen=True)
class CacheLimits:
    """How much one pool keeps; each kept term or viewer costs about 2 or 1 bytes per source."""

    terms: int
    viewers: int


@dataclass(frozen=True)
class _PoolSql:
    version: str
    sources: str  # every source of the pool: id, name, in the database's name order
    readable: str  # $1 principal, $2 admin flag
    matches: str  # $1 patterns, $2 terms, $3 via_tokens: (ord, id, sources)
    fallback: bool  # collections: readable sources matching nothing fill the answer


def _pool_sql(
    pool: str, table: str, name: str, readable: str, hits: str, *, fallback: bool
) -> _PoolSql:
    return _PoolSql(
        version=f"SELECT coalesce(sum(version), 0) FROM router_versions WHERE pool = '{pool}'",
        sources=f"SELECT id, {name} AS name FROM {table} ORDER BY {name}, id",
        readable=f"SELECT s.id FROM {table} s WHERE {readable}",
        matches=f"""WITH {terms_cte(1)},
hits AS ({hits}
)
SELECT h.ord, h.id, array_agg(DISTINCT h.source) AS sources FROM hits h GROUP BY h.ord, h.id""",
        fallback=fallback,
    )


REPOSITORY_SQL = _pool_sql(
    "repository",
    "repositories",
    "slug",
    repository_readable("s", "$1", "$2"),
    TOKEN_HITS.format(
        owner="repository_id", postings="router_repository_postings", terms="repository_terms"
    ),
    fallback=False,
)
COLLECTION_SQL = _pool_sql(
    "collection",
    "collections",
    "name",
    collection_readable("s", "$1", "$2"),
    TOKEN_HITS.format(
        owner="collection_id", postings="router_collection_postings", terms="collection_terms"
    )
    + BODY_HITS,
    fallback=True,
)


@dataclass
class _PoolState:
    """One version of one pool: its sources and what was derived from them."""

    version: Decimal
    names: list[str]  # position -> name; positions follow the database's name order
    sorted_ids: npt.NDArray[np.int64]  # ids, ascending, for looking positions up
    positions: npt.NDArray[np.int64]  # sorted_ids[i] is at position positions[i]
    limits: CacheLimits
    readable: OrderedDict[Viewer, Mask] = field(default_factory=OrderedDict)
    terms: OrderedDict[QueryTerm, Codes] = field(default_factory=OrderedDict)
    field_sets: list[frozenset[str]] = field(default_factory=lambda: [frozenset()])
    field_set_index: dict[frozenset[str], int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, version: Decimal, rows: Sequence[asyncpg.Record], limits: CacheLimits
    ) -> _PoolState:
        ids = np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows))
        order = np.argsort(ids, kind="stable")
        return cls(version, [r["name"] for r in rows], ids[order], order.astype(np.int64), limits)

    def locate(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Positions of `ids`, all of which belong to this state's snapshot."""
        at = np.searchsorted(self.sorted_ids, ids)
        if ids.size and (at.max() >= self.sorted_ids.size or (self.sorted_ids[at] != ids).any()):
            raise RuntimeError("a source outside the snapshot it was read in")
        return self.positions[at]

    def field_set(self, fields: frozenset[str]) -> int:
        code = self.field_set_index.get(fields)
        if code is None:
            code = len(self.field_sets)
            if code >= MAX_FIELD_SETS:
                raise RuntimeError("too many distinct sets of matched fields")
            self.field_sets.append(fields)
            self.field_set_index[fields] = code
        return code

    def remember_viewer(self, viewer: Viewer, mask: Mask) -> None:
        self.readable[viewer] = mask
        while len(self.readable) > self.limits.viewers:
            self.readable.popitem(last=False)

    def remember_term(self, term: QueryTerm, codes: Codes) -> None:
        self.terms[term] = codes
        while len(self.terms) > self.limits.terms:
            self.terms.popitem(last=False)

    def has(self, viewer: Viewer, terms: Sequence[QueryTerm]) -> bool:
        return viewer in self.readable and all(t in self.terms for t in terms)

    def touch(self, viewer: Viewer, terms: Sequence[QueryTerm]) -> None:
        self.readable.move_to_end(viewer)
        for t in terms:
            self.terms.move_to_end(t)


class _Pool:
    """The newest state of one pool, and how to answer a route from it."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        sql: _PoolSql,
        limits: CacheLimits,
        on_lookup: Callable[[bool], None] | None = None,
    ) -> None:
        self._pool = pool
        self._sql = sql
        self._limits = limits
        self._state: _PoolState | None = None
        self._on_lookup = on_lookup  # told whether each route was answered from the state

    def clear(self) -> None:
        self._state = None

    async def matches(self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int) -> PoolMatches:
        state = self._state
        if state is not None and state.has(viewer, terms):
            async with database_errors():
                version = await self._pool.fetchval(self._sql.version)
            # Exactly equal, never "at least": sums only grow, but a database restored from a
            # backup can go back, and a state is only ever used for the version it was read at.
            current = self._state
            if current is not None and current.version == version and current.has(viewer, terms):
                current.touch(viewer, terms)
                if self._on_lookup is not None:
                    self._on_lookup(True)
                codes = [current.terms[t] for t in terms]
                return _answer(
                    current,
                    current.readable[viewer],
                    terms,
                    codes,
                    limit,
                    fallback=self._sql.fallback,
                )
        if self._on_lookup is not None:
            self._on_lookup(False)
        state, readable, codes = await self._read(viewer, terms)
        return _answer(state, readable, terms, codes, limit, fallback=self._sql.fallback)

    async def _read(
        self, viewer: Viewer, terms: Sequence[QueryTerm]
    ) -> tuple[_PoolState, Mask, list[Codes]]:
        """A state of one snapshot holding what this route needs, and the viewer's readable
        sources and each term's matches, held apart: a concurrent route may evict them."""
        async with (
            database_errors(),
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            version = await conn.fetchval(self._sql.version)
            state = self._state
            if state is None or state.version != version:
                state = _PoolState.of(version, await conn.fetch(self._sql.sources), self._limits)
            readable = state.readable.get(viewer)
            if readable is None:
                ids = await conn.fetch(self._sql.readable, viewer.principal_id, viewer.admin)
                readable = np.zeros(len(state.names), dtype=np.bool_)
                readable[state.locate(np.array([r["id"] for r in ids], dtype=np.int64))] = True
                state.remember_viewer(viewer, readable)
            found = {t: state.terms[t] for t in terms if t in state.terms}
            missing = [t for t in terms if t not in found]
            if missing:
                rows = await conn.fetch(self._sql.matches, *term_args(missing))
                codes = [np.zeros(len(state.names), dtype=np.uint16) for _ in missing]
                if rows:
                    at = state.locate(np.array([r["id"] for r in rows], dtype=np.int64))
                    for row, position in zip(rows, at.tolist(), strict=True):
                        codes[row["ord"] - 1][position] = state.field_set(frozenset(row["sources"]))
                for term, term_codes in zip(missing, codes, strict=True):
                    state.remember_term(term, term_codes)
                    found[term] = term_codes
        # The state just read replaces the kept one even if a concurrent route kept a newer
        # one: the next route's version check then re-reads, which costs time, never exactness.
        self._state = state
        return state, readable, [found[t] for t in terms]


def _answer(
    state: _PoolState,
    readable: Mask,
    terms: Sequence[QueryTerm],
    term_codes: Sequence[Codes],
    limit: int,
    *,
    fallback: bool,
) -> PoolMatches:
    """N, df, the top `limit` sources, as RouterStore's SQL computes them (see store.py)."""
    n = int(np.count_nonzero(readable))
    result = PoolMatches(population=n)
    size = len(state.names)
    weighted = np.zeros(size, dtype=np.float64)
    matched_terms = np.zeros(size, dtype=np.int64)
    labels = np.zeros(size, dtype=np.int64)
    has_label = np.array(["label" in f for f in state.field_sets], dtype=np.bool_)
    masks: list[Mask] = []
    for term, codes in zip(terms, term_codes, strict=True):
        mask = (codes != 0) & readable
        masks.append(mask)
        df = int(np.count_nonzero(mask))
        if df == 0:
            continue
        result.document_frequency[term.text] = df
        weighted += idf(n, df) * mask
        matched_terms += mask
        labels += has_label[codes] & mask
    candidates = matched_terms > 0
    total = sum(idf(n, df) for df in result.document_frequency.values())
    top: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
    if terms and candidates.any():
        at = np.flatnonzero(candidates)
        coverage = weighted[at] / total if total > 0 else np.zeros(at.size)
        score = np.minimum(1.0, coverage * (1 + 0.5 * labels[at] / len(terms)))
        # Positions follow the database's name order, so the position breaks the last tie.
        order = np.lexsort((at, -matched_terms[at], -np.round(score, RANK_DIGITS)))
        top = at[order[:limit]]
    for position in top.tolist():
        matched = result.matches.setdefault(state.names[position], {})
        for term, codes, mask in zip(terms, term_codes, masks, strict=True):
            if mask[position]:
                matched[term.text] = state.field_sets[int(codes[position])]
    if fallback:
        unmatched = np.flatnonzero(readable & ~candidates)[:limit]
        result.fallback = [state.names[p] for p in unmatched.tolist()]
    return result


class CachedRouterStore:
    """RouterStore's interface, answered from kept per-pool state (see the module doc)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        limits: CacheLimits,
        on_lookup: Callable[[str, bool], None] | None = None,
    ) -> None:
        """`on_lookup(pool, hit)` hears, per route and pool (`repositories`,
        `collections`), whether the kept state answered it (router.app counts them)."""
        self._repositories = _Pool(pool, REPOSITORY_SQL, limits, _for("repositories", on_lookup))
        self._collections = _Pool(pool, COLLECTION_SQL, limits, _for("collections", on_lookup))

    def clear(self) -> None:
        """Forgets everything kept (benchmarks measure the first route after a change)."""
        self._repositories.clear()
        self._collections.clear()

    async def repositories(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        """The `limit` best-matching readable repositories; none when no term is given."""
        if not terms:
            return PoolMatches()
        return await self._repositories.matches(viewer, terms, limit)

    async def collections(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        """The `limit` best-matching readable collections, and up to `limit` fallbacks."""
        return await self._collections.matches(viewer, terms, limit)


def _for(name: str, on_lookup: Callable[[str, bool], None] | None) -> Callable[[bool], None] | None:
    if on_lookup is None:
        return None
    return lambda hit: on_lookup(name, hit)

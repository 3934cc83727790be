"""The router's SQL: one read-only query per pool, with access control inside it.

Each query matches every query term against the corpus retrieval precomputed at index time
(repository_terms / collection_terms, plus chunk bodies for collections) through the
router's postings (migrations/0001, kept in step by triggers). It returns N (readable sources
in the pool), df (readable sources matching each term) and, for the best `limit` sources,
which terms matched in which fields. Sources the caller may not read are removed before
anything is counted, so they are absent from N and df as well as from the results: a caller
cannot even infer that they exist.

The query ranks with the same formula as router.scoring only to pick the top `limit` sources
inside the database (at 10,000 repositories a common term matches thousands; shipping them
all to Python dominated the latency). Python then scores those few with router.scoring, the
one authoritative implementation, and the tests check that both agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import asyncpg

from cograph_api.access_rules import Viewer, collection_readable, repository_readable
from router.terms import QueryTerm
from svckit.errors import DeadlineExceeded, Unavailable

# Scores are rounded before ordering so that float summation order cannot split a tie that
# Python (which rounds the same way, see routing.RANK_DIGITS) sees as a tie.
RANK_DIGITS = 12

# $1 principal id, $2 admin flag, $3 LIKE patterns, $4 the terms themselves, $5 whether each
# term goes through the token postings (see migrations/0001 and QueryTerm.via_tokens),
# $6 how many sources to return.
# Each LATERAL subquery runs once per term, so every LIKE is a parameterised trigram index
# scan, and the filter on q.via_tokens keeps each term to one of the two paths.


def terms_cte(first: int) -> str:
    """The query's terms as rows q(ord, pattern, term, via_tokens), from the three array
    parameters starting at $first (term_args gives them)."""
    patterns, texts, via_tokens = (f"${first + i}" for i in range(3))
    return f"""
q AS (
    SELECT u.ord::int AS ord, u.pattern, u.term, u.via_tokens
    FROM unnest({patterns}::text[], {texts}::text[], {via_tokens}::boolean[])
        WITH ORDINALITY AS u(pattern, term, via_tokens, ord)
)"""


TOKEN_HITS = """
    SELECT q.ord, p.{owner} AS id, p.source
    FROM q
    CROSS JOIN LATERAL (SELECT t.id FROM router_tokens t WHERE t.token LIKE q.pattern) t
    JOIN {postings} p ON p.token_id = t.id
    WHERE q.via_tokens
    UNION ALL
    SELECT q.ord, e.{owner}, e.source
    FROM q CROSS JOIN LATERAL (
        SELECT x.{owner}, x.source FROM {terms} x WHERE x.term LIKE q.pattern
    ) e
    WHERE NOT q.via_tokens"""

# A term matches a collection's bodies when the collection has all of the term's 'english'
# lexemes (router_collection_lexemes: per-collection lexeme counts over its chunks).
BODY_HITS = """
    UNION ALL
    SELECT q.ord, b.collection_id, 'body'
    FROM q CROSS JOIN LATERAL (
        SELECT tsvector_to_array(to_tsvector('english', q.term)) AS lexemes
    ) x CROSS JOIN LATERAL (
        SELECT l.collection_id FROM router_collection_lexemes l
        WHERE l.lexeme = ANY (x.lexemes)
        GROUP BY l.collection_id
        HAVING count(*) = cardinality(x.lexemes)
    ) b"""

# Output rows: kind 'n' (n), 'df' (ord, df), 'hit' (name, ord, sources) for the top $6
# sources, and for collections 'fallback' (name): up to $6 readable collections that matched
# nothing, from the same snapshot and ACL, since collections are always returned up to the
# requested count.
_POOL_SQL = """
WITH {terms_cte},
readable AS MATERIALIZED (
    SELECT s.id, s.{name} AS name FROM {table} s WHERE {readable}
),
hits AS ({hits}
),
matched AS MATERIALIZED (
    SELECT h.ord, h.id, array_agg(DISTINCT h.source) AS sources
    FROM hits h JOIN readable r ON r.id = h.id
    GROUP BY h.ord, h.id
),
n AS (SELECT count(*) AS n FROM readable),
df AS MATERIALIZED (
    SELECT m.ord, count(*) AS df, ln((n.n + 1)::float8 / (count(*) + 1)) AS idf
    FROM matched m CROSS JOIN n GROUP BY m.ord, n.n
),
total AS (SELECT sum(idf) AS idf FROM df),
ranked AS (
    SELECT m.id, r.name, count(*) AS terms,
           round(least(1.0, coalesce(sum(df.idf) / nullif(total.idf, 0), 0)
                 * (1 + 0.5 * count(*) FILTER (WHERE 'label' = ANY (m.sources))
                    / cardinality($4::text[])))::numeric, {digits}) AS score
    FROM matched m JOIN df ON df.ord = m.ord JOIN readable r ON r.id = m.id CROSS JOIN total
    GROUP BY m.id, r.name, total.idf
),
top AS (SELECT id, name FROM ranked ORDER BY score DESC, terms DESC, name LIMIT $6)
SELECT 'n' AS kind, NULL::text AS name, NULL::int AS ord, NULL::text[] AS sources, n AS value
FROM n
UNION ALL
SELECT 'df', NULL, ord, NULL, df FROM df
UNION ALL
SELECT 'hit', t.name, m.ord, m.sources, NULL FROM top t JOIN matched m ON m.id = t.id
{fallback}
"""

_FALLBACK = """UNION ALL
(SELECT 'fallback', r.name, NULL, NULL, NULL FROM readable r
 WHERE NOT EXISTS (SELECT 1 FROM matched m WHERE m.id = r.id)
 ORDER BY r.name LIMIT $6)"""

_REPOSITORY_SQL = _POOL_SQL.format(
    terms_cte=terms_cte(3),
    name="slug",
    table="repositories",
    readable=repository_readable("s", "$1", "$2"),
    hits=TOKEN_HITS.format(
        owner="repository_id", postings="router_repository_postings", terms="repository_terms"
    ),
    digits=RANK_DIGITS,
    fallback="",
)

_COLLECTION_SQL = _POOL_SQL.format(
    terms_cte=terms_cte(3),
    name="name",
    table="collections",
    readable=collection_readable("s", "$1", "$2"),
    hits=TOKEN_HITS.format(
        owner="collection_id", postings="router_collection_postings", terms="collection_terms"
    )
    + BODY_HITS,
    digits=RANK_DIGITS,
    fallback=_FALLBACK,
)


@dataclass
class PoolMatches:
    """What one pool's query found, restricted to what the caller may read."""

    population: int = 0  # N
    document_frequency: dict[str, int] = field(default_factory=dict)  # df per query term
    # The top sources: name -> query term -> the fields it matched in (label, readme, ...)
    matches: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    fallback: list[str] = field(default_factory=list)  # readable, unmatched, by name


def term_args(terms: Sequence[QueryTerm]) -> tuple[list[str], list[str], list[bool]]:
    return (
        [t.like_pattern for t in terms],
        [t.text for t in terms],
        [t.via_tokens for t in terms],
    )


def _collect(rows: Sequence[asyncpg.Record], terms: Sequence[QueryTerm]) -> PoolMatches:
    result = PoolMatches()
    for row in rows:
        kind = row["kind"]
        if kind == "n":
            result.population = int(row["value"])
        elif kind == "df":
            result.document_frequency[terms[row["ord"] - 1].text] = int(row["value"])
        elif kind == "hit":
            term = terms[row["ord"] - 1].text
            result.matches.setdefault(row["name"], {})[term] = frozenset(row["sources"])
        else:
            result.fallback.append(row["name"])
    return result


@asynccontextmanager
async def database_errors() -> AsyncIterator[None]:
    """Turns the database's failures into statuses a caller can act on (retry, back off)."""
    try:
        yield
    except asyncpg.QueryCanceledError:
        # statement_timeout (ROUTER_STATEMENT_TIMEOUT_MS); a cancelled RPC raises CancelledError.
        raise DeadlineExceeded("the route query took too long") from None
    except (OSError, asyncpg.PostgresConnectionError, asyncpg.CannotConnectNowError):
        raise Unavailable("the database is unavailable") from None


class SourceStore(Protocol):
    """What routing needs from the database: RouterStore, or CachedRouterStore (cache.py)."""

    async def repositories(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches: ...

    async def collections(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches: ...


class RouterStore:
    """Reads retrieval's tables through a pool opened read-only (see app.open_pool).

    Every route derives N, df and the top sources from the postings in one query per pool;
    CachedRouterStore answers the same from kept state and is checked against this one.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def _fetch(
        self, sql: str, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        async with database_errors():
            rows = await self._pool.fetch(
                sql, viewer.principal_id, viewer.admin, *term_args(terms), limit
            )
        return _collect(rows, terms)

    async def repositories(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        """The `limit` best-matching readable repositories; none when no term is given."""
        if not terms:
            return PoolMatches()
        return await self._fetch(_REPOSITORY_SQL, viewer, terms, limit)

    async def collections(
        self, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        """The `limit` best-matching readable collections, and up to `limit` fallbacks."""
        return await self._fetch(_COLLECTION_SQL, viewer, terms, limit)

"""All of the commons' SQL.

Votes and comments change a post's denormalised score / comment_count in the same
transaction, under the post's row lock, so concurrent voters never lose an update.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

import asyncpg
import numpy as np
import numpy.typing as npt

from commons.models import Comment, PendingEmbed, Post, SearchHit, VoteOutcome
from commons.ranking import RankingWeights, Strategy, ef_search_for
from commons.validation import NewPost

Vector = npt.NDArray[np.float32]

_POST_COLUMNS = """
    p.id, u.contributor_no, p.title, p.body, p.tags, p.score, p.comment_count, p.created_at,
    p.embedding IS NOT NULL AS searchable
"""

# Parameters: $1 query vector, $2 limit, $3 snippet length, $4 / $5 the weights; two-stage
# adds $6 = K; the escaped phrase patterns come last, and only when there are phrases.
_BLEND = "($4::float8 * (1 - {distance}) + $5::float8 * ln(1 + GREATEST(p.score, 0)))"
# Title, body and tags as one haystack for the quoted-phrase filters: the expression of the
# trigram index posts_haystack_trgm (migration 0002), one ILIKE per phrase so each can use it.
_HAYSTACK = "commons_haystack(p.title, p.body, p.tags)"


def phrase_filter(first: int, count: int) -> str:
    """`AND haystack ILIKE $first AND ...` for `count` patterns; empty for none."""
    return "".join(f" AND {_HAYSTACK} ILIKE ${n}::text" for n in range(first, first + count))


# Ranking happens on ids and scores only; bodies are read (and snipped) for the winners.
_HITS = """
SELECT p.id, u.contributor_no, p.title, left(p.body, $3) AS body,
       char_length(p.body) AS body_chars, p.tags, p.score, p.comment_count, p.created_at
FROM ranked r
JOIN posts p ON p.id = r.id
JOIN users u ON u.id = p.author_id
ORDER BY r.rank_score DESC, r.score DESC, r.created_at DESC, r.id
"""

EXACT_SQL = f"""
WITH ranked AS (
    SELECT p.id, {_BLEND.format(distance="(p.embedding <=> $1::vector)")} AS rank_score,
           p.score, p.created_at
    FROM posts p
    WHERE p.embedding IS NOT NULL
      {{phrases}}
    ORDER BY rank_score DESC, p.score DESC, p.created_at DESC, p.id
    LIMIT $2
)
{_HITS}
"""

# Stage one orders by pure distance, which the HNSW index serves; stage two re-ranks those
# $6 candidates with the same blended expression as the exact scan.
TWO_STAGE_SQL = f"""
WITH candidates AS MATERIALIZED (
    SELECT p.id, p.embedding <=> $1::vector AS distance
    FROM posts p
    WHERE p.embedding IS NOT NULL
      {{phrases}}
    ORDER BY p.embedding <=> $1::vector
    LIMIT $6
), ranked AS (
    SELECT p.id, {_BLEND.format(distance="c.distance")} AS rank_score, p.score, p.created_at
    FROM candidates c
    JOIN posts p ON p.id = c.id
    ORDER BY rank_score DESC, p.score DESC, p.created_at DESC, p.id
    LIMIT $2
)
{_HITS}
"""


class DeleteOutcome(Enum):
    DELETED = "deleted"
    NOT_FOUND = "not_found"
    NOT_AUTHOR = "not_author"


class VoteRefusal(Enum):
    NOT_FOUND = "not_found"
    OWN_POST = "own_post"


@dataclass(frozen=True)
class SearchParams:
    vector: Vector
    patterns: Sequence[str]  # ILIKE patterns, already escaped
    limit: int
    snippet: int
    weights: RankingWeights
    strategy: Strategy
    k: int


def search_sql(strategy: Strategy, phrases: int) -> str:
    """The query for `strategy` with `phrases` quoted-phrase filters (the filtered strategy
    is the exact scan; only its plan differs, see configure_filtered)."""
    if strategy is Strategy.TWO_STAGE:
        template, patterns_at = TWO_STAGE_SQL, 7
    else:
        template, patterns_at = EXACT_SQL, 6
    return template.format(phrases=phrase_filter(patterns_at, phrases))


def search_args(params: SearchParams) -> list[object]:
    """The arguments for search_sql(params.strategy, len(params.patterns)), in order."""
    args: list[object] = [
        params.vector,
        params.limit,
        params.snippet,
        params.weights.semantic,
        params.weights.votes,
    ]
    if params.strategy is Strategy.TWO_STAGE:
        args.append(params.k)
    args.extend(params.patterns)
    return args


def _post(row: asyncpg.Record) -> Post:
    return Post(
        id=row["id"],
        contributor_no=row["contributor_no"],
        title=row["title"],
        body=row["body"],
        tags=list(row["tags"]),
        score=row["score"],
        comment_count=row["comment_count"],
        created_at=row["created_at"],
        searchable=row["searchable"],
    )


def _comment(row: asyncpg.Record) -> Comment:
    return Comment(
        id=row["id"],
        post_id=row["post_id"],
        contributor_no=row["contributor_no"],
        body=row["body"],
        created_at=row["created_at"],
    )


class CommonsStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @staticmethod
    async def _user(conn: asyncpg.Connection, principal_id: str) -> uuid.UUID:
        """The user row for a principal, created (with the next contributor_no) on first use.

        Select first so the identity sequence is not consumed on every write; the insert's
        ON CONFLICT covers two first writes racing, and the re-select sees the winner's row.
        """
        for _ in range(3):
            found = await conn.fetchval(
                "SELECT id FROM users WHERE principal_id = $1", principal_id
            )
            if found is not None:
                return found
            created = await conn.fetchval(
                "INSERT INTO users (principal_id) VALUES ($1) "
                "ON CONFLICT (principal_id) DO NOTHING RETURNING id",
                principal_id,
            )
            if created is not None:
                return created
        raise RuntimeError(f"could not create or find the user for principal {principal_id!r}")

    async def create_post(self, principal_id: str, post: NewPost) -> Post:
        async with self._pool.acquire() as conn, conn.transaction():
            author = await self._user(conn, principal_id)
            row = await conn.fetchrow(
                f"""
                WITH p AS (
                    INSERT INTO posts (author_id, title, body, tags) VALUES ($1, $2, $3, $4)
                    RETURNING *
                )
                SELECT {_POST_COLUMNS} FROM p JOIN users u ON u.id = p.author_id
                """,
                author,
                post.title,
                post.body,
                post.tags,
            )
        assert row is not None
        return _post(row)

    async def get_post(self, post_id: uuid.UUID) -> Post | None:
        row = await self._pool.fetchrow(
            f"SELECT {_POST_COLUMNS} FROM posts p JOIN users u ON u.id = p.author_id "
            "WHERE p.id = $1",
            post_id,
        )
        return _post(row) if row is not None else None

    async def delete_post(self, post_id: uuid.UUID, principal_id: str) -> DeleteOutcome:
        async with self._pool.acquire() as conn, conn.transaction():
            author = await conn.fetchval(
                "SELECT u.principal_id FROM posts p JOIN users u ON u.id = p.author_id "
                "WHERE p.id = $1 FOR UPDATE OF p",
                post_id,
            )
            if author is None:
                return DeleteOutcome.NOT_FOUND
            if author != principal_id:
                return DeleteOutcome.NOT_AUTHOR
            await conn.execute("DELETE FROM posts WHERE id = $1", post_id)
            return DeleteOutcome.DELETED

    async def vote(
        self, post_id: uuid.UUID, principal_id: str, value: int
    ) -> VoteOutcome | VoteRefusal:
        """Sets (value +-1) or withdraws (0) the principal's vote, or says why it may not.

        An author may not vote on their own note (a score is what others think of it);
        withdrawing is always allowed, so a vote cast before that rule can still be undone.

        The post row is locked first, so votes on one post serialise; the score is then
        recomputed from the votes table (a fresh snapshot under READ COMMITTED sees every
        committed vote), so it is exact however many voters race.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            voter = await self._user(conn, principal_id)
            author = await conn.fetchval(
                "SELECT author_id FROM posts WHERE id = $1 FOR UPDATE", post_id
            )
            if author is None:
                return VoteRefusal.NOT_FOUND
            if value != 0 and author == voter:
                return VoteRefusal.OWN_POST
            if value == 0:
                await conn.execute(
                    "DELETE FROM votes WHERE post_id = $1 AND user_id = $2", post_id, voter
                )
            else:
                await conn.execute(
                    "INSERT INTO votes (post_id, user_id, value) VALUES ($1, $2, $3) "
                    "ON CONFLICT (post_id, user_id) "
                    "DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                    post_id,
                    voter,
                    value,
                )
            score = await conn.fetchval(
                "UPDATE posts SET score = "
                "(SELECT coalesce(sum(value), 0) FROM votes WHERE post_id = $1) "
                "WHERE id = $1 RETURNING score",
                post_id,
            )
        return VoteOutcome(post_id=post_id, score=int(score), value=value)

    async def add_comment(
        self, post_id: uuid.UUID, principal_id: str, body: str
    ) -> tuple[Comment, int] | None:
        async with self._pool.acquire() as conn, conn.transaction():
            author = await self._user(conn, principal_id)
            count = await conn.fetchval(
                "UPDATE posts SET comment_count = comment_count + 1 WHERE id = $1 "
                "RETURNING comment_count",
                post_id,
            )
            if count is None:
                return None
            row = await conn.fetchrow(
                "WITH c AS (INSERT INTO comments (post_id, author_id, body) "
                "VALUES ($1, $2, $3) RETURNING *) "
                "SELECT c.id, c.post_id, u.contributor_no, c.body, c.created_at "
                "FROM c JOIN users u ON u.id = c.author_id",
                post_id,
                author,
                body,
            )
        assert row is not None
        return _comment(row), int(count)

    async def list_comments(self, post_id: uuid.UUID) -> list[Comment] | None:
        async with self._pool.acquire() as conn:
            exists = await conn.fetchval("SELECT 1 FROM posts WHERE id = $1", post_id)
            if exists is None:
                return None
            rows = await conn.fetch(
                "SELECT c.id, c.post_id, u.contributor_no, c.body, c.created_at "
                "FROM comments c JOIN users u ON u.id = c.author_id "
                "WHERE c.post_id = $1 ORDER BY c.created_at, c.id",
                post_id,
            )
        return [_comment(row) for row in rows]

    async def set_embedding(
        self,
        post_id: uuid.UUID,
        vector: Vector,
        hold: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
    ) -> bool:
        """Writes a note's vector unless it already has one (the backfill may race us).
        `hold` runs first in the same transaction (the embedding space's check)."""
        async with self._pool.acquire() as conn, conn.transaction():
            if hold is not None:
                await hold(conn)
            status: str = await conn.execute(
                "UPDATE posts SET embedding = $2 WHERE id = $1 AND embedding IS NULL",
                post_id,
                vector,
            )
        return status.endswith(" 1")

    async def pending_embeds(
        self, limit: int, after: tuple[datetime, uuid.UUID] | None = None
    ) -> list[PendingEmbed]:
        """Notes without a vector, oldest first, after a keyset cursor."""
        if after is None:
            rows = await self._pool.fetch(
                "SELECT id, title, body, created_at FROM posts WHERE embedding IS NULL "
                "ORDER BY created_at, id LIMIT $1",
                limit,
            )
        else:
            rows = await self._pool.fetch(
                "SELECT id, title, body, created_at FROM posts WHERE embedding IS NULL "
                "AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $1",
                limit,
                after[0],
                after[1],
            )
        return [PendingEmbed(r["id"], r["title"], r["body"], r["created_at"]) for r in rows]

    async def note_count_estimate(self) -> int:
        """The planner's row estimate (free), or an exact count before the first ANALYZE."""
        estimate = await self._pool.fetchval(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = 'posts'::regclass"
        )
        if estimate is None or estimate < 0:
            estimate = await self._pool.fetchval("SELECT count(*) FROM posts")
        return int(estimate)

    async def count_matching(self, patterns: Sequence[str], cap: int) -> int:
        """How many searchable notes pass every phrase filter, counting no further than
        cap + 1 (through the trigram index: cheap when few do)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await configure_filtered(conn)
            count: int = await conn.fetchval(
                "SELECT count(*) FROM (SELECT 1 FROM posts p WHERE p.embedding IS NOT NULL"
                f"{phrase_filter(2, len(patterns))} LIMIT $1) s",
                cap + 1,
                *patterns,
            )
        return count

    async def search(self, params: SearchParams) -> list[SearchHit]:
        sql = search_sql(params.strategy, len(params.patterns))
        async with self._pool.acquire() as conn, conn.transaction():
            if params.strategy is Strategy.TWO_STAGE:
                await configure_two_stage(conn, params.k, filtered=bool(params.patterns))
            elif params.strategy is Strategy.FILTERED:
                await configure_filtered(conn)
            rows = await conn.fetch(sql, *search_args(params))
        return [
            SearchHit(
                id=row["id"],
                contributor_no=row["contributor_no"],
                title=row["title"],
                body=row["body"],
                body_truncated=row["body_chars"] > len(row["body"]),
                body_chars=row["body_chars"],
                tags=list(row["tags"]),
                score=row["score"],
                comment_count=row["comment_count"],
                created_at=row["created_at"],
            )
            for row in rows
        ]

    async def log_search(
        self, query: str, principal_id: str | None, strategy: Strategy, hits: Sequence[SearchHit]
    ) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            search_id: int = await conn.fetchval(
                "INSERT INTO searches (query, principal_id, result_count, strategy) "
                "VALUES ($1, $2, $3, $4) RETURNING id",
                query,
                principal_id,
                len(hits),
                strategy.value,
            )
            await conn.executemany(
                "INSERT INTO search_results (search_id, rank, post_id, score_at) "
                "VALUES ($1, $2, $3, $4)",
                [(search_id, rank, hit.id, hit.score) for rank, hit in enumerate(hits, 1)],
            )
        return search_id


async def configure_two_stage(conn: asyncpg.Connection, k: int, *, filtered: bool) -> None:
    """Transaction-local HNSW settings so stage one really yields K candidates.

    HNSW returns at most ef_search rows and applies WHERE clauses after the index scan; with
    phrase filters, iterative scanning keeps reading the graph until K rows pass them.
    """
    await conn.execute(f"SET LOCAL hnsw.ef_search = {ef_search_for(k)}")
    if filtered:
        await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # The planner guesses an ILIKE filter keeps almost nothing and would scan the whole
        # table instead (measured: as slow as the exact path); stage one must be the index.
        # Too selective a phrase then ends the iterative scan short, and the board falls
        # back to the filtered scan. The board only takes this path when the phrases match
        # many notes, so the trigram index must not be chosen either.
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")


async def configure_filtered(conn: asyncpg.Connection) -> None:
    """The phrases are known to be selective: find their notes through the trigram index
    (the planner cannot tell from an ILIKE how few notes pass it)."""
    await conn.execute("SET LOCAL enable_seqscan = off")

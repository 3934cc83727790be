"""All of the commons' SQL.

Votes and comments change a post's denormalised score / comment_count in the same
transaction, under the post's row lock, so concurrent voters never lose an update.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt

from commons import anchor_store
from commons.anchor_store import NewAnchor
from commons.listing import After, ListPage
from commons.models import (
    Comment,
    ModerationEntry,
    PendingEmbed,
    Post,
    PostSummary,
    Profile,
    SearchHit,
    VoteOutcome,
)
from commons.query import escape_like
from commons.ranking import CHANGED_STATUSES, RankingWeights, Strategy, ef_search_for
from commons.validation import NewPost
from svckit import requestctx
from svckit.replicas import ReadRouter

Vector = npt.NDArray[np.float32]

_POST_COLUMNS = """
    p.id, u.contributor_no, p.title, p.body, p.tags, p.score, p.comment_count, p.created_at,
    p.embedding IS NOT NULL AS searchable, p.hidden_at IS NOT NULL AS hidden,
    u.principal_id AS author, u.display_name AS author_name
"""
_COMMENT_COLUMNS = (
    "c.id, c.post_id, u.contributor_no, c.body, c.created_at, c.hidden_at IS NOT NULL AS hidden, "
    "u.display_name AS author_name"
)
# How much of a moderated note's title or comment's body the moderation log keeps.
EXCERPT_CHARS = 200


def visible(hidden_at: str, author: str, viewer_param: str, admin_param: str) -> str:
    """Boolean SQL: a row is visible to the bound viewer. Hidden notes and comments are seen
    by their author and by admins only; for anyone else they do not exist (not found), so
    a hidden note cannot be read, voted on or commented on. An anonymous viewer (NULL) sees
    only what is not hidden."""
    return (
        f"({hidden_at} IS NULL OR {admin_param}::boolean "
        f"OR ({author} = {viewer_param}::text) IS TRUE)"
    )


# Parameters: $1 query vector, $2 limit, $3 snippet length, $4 / $5 / $6 the weights
# (semantic, votes, changed anchors); two-stage adds $7 = K; then the escaped phrase
# patterns, one per phrase; then a scope's, when there is one (scope_filter).
_BLEND = (
    "($4::float8 * (1 - {distance}) + $5::float8 * ln(1 + GREATEST(p.score, 0)) "
    "- $6::float8 * (s.post_id IS NOT NULL)::int)"
)
# The notes whose code changed under them: anchored, and every anchor body_changed,
# signature_changed or orphaned. A moved anchor is not one: its code is the same body under
# another path or name (moved_to says where), so what the note says still holds; a note
# with one fresh or moved anchor still describes code as it is. One pass over the anchors,
# hash-joined: not a lookup per scored note.
_CHANGED_NOTES = (
    "SELECT a.post_id FROM post_anchors a {where}GROUP BY a.post_id "
    "HAVING bool_and(a.status IN (" + ", ".join(f"'{s}'" for s in CHANGED_STATUSES) + "))"
)
# Title, body and tags as one haystack for the quoted-phrase filters: the expression of the
# trigram index posts_haystack_trgm (migration 0002), one ILIKE per phrase so each can use it.
_HAYSTACK = "commons_haystack(p.title, p.body, p.tags)"


def phrase_filter(first: int, count: int) -> str:
    """`AND haystack ILIKE $first AND ...` for `count` patterns; empty for none."""
    return "".join(f" AND {_HAYSTACK} ILIKE ${n}::text" for n in range(first, first + count))


@dataclass(frozen=True)
class AnchorScope:
    """A scoped search's filter: notes with an anchor in repository `repository_id` (the
    id the caller was found to read), where the code is now (moved_* while moved), under the
    path prefix `path` and/or on `symbol` (qualified name or dotted suffix); '' for neither."""

    repository_id: int
    path: str
    symbol: str


# Where an anchor's code is now: where it moved to while it is moved (moved_* are set only
# then), else where it was resolved or last confirmed (the last place known, once orphaned).
_ANCHOR_PATH = "coalesce(a.moved_path, a.path)"
_ANCHOR_NAME = r"regexp_replace(coalesce(a.moved_qualified_name, a.qualified_name), '#[0-9]+$', '')"


def scope_filter(first: int, scope: AnchorScope | None) -> str:
    """`AND p.id IN (notes anchored in scope)` with its parameters from $first (see
    scope_args); empty without a scope."""
    if scope is None:
        return ""
    conditions = [f"a.repository_id = ${first}::bigint"]
    n = first + 1
    if scope.path:
        conditions.append(f"({_ANCHOR_PATH} = ${n}::text OR {_ANCHOR_PATH} LIKE ${n + 1}::text)")
        n += 2
    if scope.symbol:
        conditions.append(f"({_ANCHOR_NAME} = ${n}::text OR {_ANCHOR_NAME} LIKE ${n + 1}::text)")
    return (
        " AND p.id IN (SELECT a.post_id FROM post_anchors a WHERE " + " AND ".join(conditions) + ")"
    )


def scope_args(scope: AnchorScope | None) -> list[object]:
    """scope_filter's parameters, in order: the path matches itself or what lies under it
    (`dir/...`), the symbol itself or any qualified name ending in `.symbol`."""
    if scope is None:
        return []
    args: list[object] = [scope.repository_id]
    if scope.path:
        args += [scope.path, escape_like(scope.path) + "/%"]
    if scope.symbol:
        args += [scope.symbol, "%." + escape_like(scope.symbol)]
    return args


# Ranking happens on ids and scores only; bodies are read (and snipped) for the winners.
_HITS = """
SELECT p.id, u.contributor_no, u.display_name AS author_name, p.title,
       left(p.body, $3) AS body, char_length(p.body) AS body_chars, p.tags, p.score,
       p.comment_count, p.created_at
FROM ranked r
JOIN posts p ON p.id = r.id
JOIN users u ON u.id = p.author_id
ORDER BY r.rank_score DESC, r.score DESC, r.created_at DESC, r.id
"""

EXACT_SQL = f"""
WITH changed AS MATERIALIZED ({_CHANGED_NOTES.format(where="")}),
ranked AS (
    SELECT p.id, {_BLEND.format(distance="(p.embedding <=> $1::vector)")} AS rank_score,
           p.score, p.created_at
    FROM posts p
    LEFT JOIN changed s ON s.post_id = p.id
    WHERE p.embedding IS NOT NULL AND p.hidden_at IS NULL
      {{filters}}
    ORDER BY rank_score DESC, p.score DESC, p.created_at DESC, p.id
    LIMIT $2
)
{_HITS}
"""

# Stage one orders by pure distance, which the HNSW index serves; stage two re-ranks those
# $7 candidates with the same blended expression as the exact scan.
TWO_STAGE_SQL = f"""
WITH candidates AS MATERIALIZED (
    SELECT p.id, p.embedding <=> $1::vector AS distance
    FROM posts p
    WHERE p.embedding IS NOT NULL AND p.hidden_at IS NULL
      {{filters}}
    ORDER BY p.embedding <=> $1::vector
    LIMIT $7
), changed AS MATERIALIZED (
    {_CHANGED_NOTES.format(where="WHERE a.post_id IN (SELECT id FROM candidates) ")}
), ranked AS (
    SELECT p.id, {_BLEND.format(distance="c.distance")} AS rank_score, p.score, p.created_at
    FROM candidates c
    JOIN posts p ON p.id = c.id
    LEFT JOIN changed s ON s.post_id = p.id
    ORDER BY rank_score DESC, p.score DESC, p.created_at DESC, p.id
    LIMIT $2
)
{_HITS}
"""


def listing_query(
    page: ListPage, after: After | None, snippet: int, admin: bool
) -> tuple[str, list[object]]:
    """One page of the listing and its arguments: up to page.size + 1 notes (one more than
    a page tells whether another follows), hidden ones only for an admin, in the page's
    order after the cursor's key. Each order is a keyset that migration 0006's indexes
    serve, and the tag filter is the GIN index's `@>`."""
    args: list[object] = [page.size + 1, snippet]

    def bind(value: object, sql_type: str) -> str:
        args.append(value)
        return f"${len(args)}::{sql_type}"

    where = ["p.hidden_at IS NULL"] if not admin else []
    if page.tag is not None:
        where.append(f"p.tags @> ARRAY[{bind(page.tag, 'text')}]")
    if page.sort == "top":
        order = "p.score DESC, p.created_at DESC, p.id DESC"
        if after is not None:
            where.append(
                f"(p.score, p.created_at, p.id) < ({bind(after.score, 'bigint')}, "
                f"{bind(after.created_at, 'timestamptz')}, {bind(after.id, 'uuid')})"
            )
    else:
        order = "p.created_at DESC, p.id DESC"
        if after is not None:
            where.append(
                f"(p.created_at, p.id) < ({bind(after.created_at, 'timestamptz')}, "
                f"{bind(after.id, 'uuid')})"
            )
    sql = f"""
        SELECT p.id, u.contributor_no, u.display_name AS author_name, p.title,
               left(p.body, $2) AS body, char_length(p.body) AS body_chars, p.tags, p.score,
               p.comment_count, p.created_at, p.hidden_at IS NOT NULL AS hidden,
               p.embedding IS NOT NULL AS searchable
        FROM posts p JOIN users u ON u.id = p.author_id
        {"WHERE " + " AND ".join(where) if where else ""}
        ORDER BY {order}
        LIMIT $1
    """
    return sql, args


def _hit_fields(row: asyncpg.Record) -> dict[str, Any]:
    """A search or listing row as a SearchHit's fields (the SQL snips the body;
    `body_chars` is its whole length)."""
    return {
        "id": row["id"],
        "contributor_no": row["contributor_no"],
        "title": row["title"],
        "body": row["body"],
        "body_truncated": row["body_chars"] > len(row["body"]),
        "body_chars": row["body_chars"],
        "tags": list(row["tags"]),
        "score": row["score"],
        "comment_count": row["comment_count"],
        "created_at": row["created_at"],
        "author_name": row["author_name"],
    }


def _summary(row: asyncpg.Record) -> PostSummary:
    return PostSummary(**_hit_fields(row), hidden=row["hidden"], searchable=row["searchable"])


class DeleteOutcome(Enum):
    DELETED = "deleted"
    NOT_FOUND = "not_found"
    NOT_AUTHOR = "not_author"
    NEEDS_REASON = "needs_reason"  # an admin deleting another's note or comment gave no reason


@dataclass(frozen=True)
class Actor:
    """Who deletes: their principal, whether they are an admin, and the reason given (if
    any), which a deletion of another author's note or comment needs."""

    principal_id: str
    admin: bool
    reason: str | None


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
    scope: AnchorScope | None = None


def search_sql(strategy: Strategy, phrases: int, scope: AnchorScope | None = None) -> str:
    """The query for `strategy` with `phrases` quoted-phrase filters and the scope's filter
    (the filtered strategy is the exact scan; only its plan differs, see
    configure_filtered)."""
    if strategy is Strategy.TWO_STAGE:
        template, patterns_at = TWO_STAGE_SQL, 8
    else:
        template, patterns_at = EXACT_SQL, 7
    filters = phrase_filter(patterns_at, phrases) + scope_filter(patterns_at + phrases, scope)
    return template.format(filters=filters)


def search_args(params: SearchParams) -> list[object]:
    """The arguments for search_sql(params.strategy, len(params.patterns), params.scope),
    in order."""
    args: list[object] = [
        params.vector,
        params.limit,
        params.snippet,
        params.weights.semantic,
        params.weights.votes,
        params.weights.changed_anchors,
    ]
    if params.strategy is Strategy.TWO_STAGE:
        args.append(params.k)
    args.extend(params.patterns)
    args.extend(scope_args(params.scope))
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
        hidden=row["hidden"],
        author=row["author"],
        author_name=row["author_name"],
    )


def _comment(row: asyncpg.Record) -> Comment:
    return Comment(
        id=row["id"],
        post_id=row["post_id"],
        contributor_no=row["contributor_no"],
        body=row["body"],
        created_at=row["created_at"],
        hidden=row["hidden"],
        author_name=row["author_name"],
    )


@dataclass(frozen=True)
class Moderated:
    """What a moderation action applies to, as the log keeps it."""

    kind: str  # post, comment
    id: uuid.UUID
    post_id: uuid.UUID  # the note itself, or the note the comment is on
    author: str  # the principal who wrote it
    text: str  # its title (a note) or body (a comment), cut to EXCERPT_CHARS when logged


async def _log(
    conn: asyncpg.Connection, actor: str, action: str, reason: str, target: Moderated
) -> None:
    """Records a moderation action in the transaction that takes it."""
    await conn.execute(
        "INSERT INTO moderation_log (principal_id, action, target_kind, target_id, post_id, "
        "target_author, target_excerpt, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        actor,
        action,
        target.kind,
        target.id,
        target.post_id,
        target.author,
        target.text[:EXCERPT_CHARS],
        reason,
    )


class CommonsStore:
    def __init__(self, pool: asyncpg.Pool, reads: ReadRouter | None = None) -> None:
        self._pool = pool
        # Where reads run: a replica that has replayed the caller's own writes and every
        # reader's fences (a note hidden or deleted), else the primary (svckit.replicas).
        self._reads = reads

    async def _reader(self) -> asyncpg.Pool:
        """The pool for a read of the current caller."""
        if self._reads is None:
            return self._pool
        principal = requestctx.current_principal()
        return (await self._reads.for_read(principal.id if principal else "")).pool

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

    async def create_post(
        self, principal_id: str, post: NewPost, anchors: Sequence[NewAnchor] = ()
    ) -> Post:
        """Stores the note and its anchors (already resolved) in one transaction."""
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
            if anchors:
                await anchor_store.insert(conn, row["id"], anchors)
                return replace(_post(row), anchors=await anchor_store.of_post(conn, row["id"]))
        return _post(row)

    async def get_post(self, post_id: uuid.UUID, viewer: str | None, admin: bool) -> Post | None:
        """The note, or None when it does not exist or is hidden from this viewer."""
        pool = await self._reader()
        row = await pool.fetchrow(
            f"SELECT {_POST_COLUMNS} FROM posts p JOIN users u ON u.id = p.author_id "
            f"WHERE p.id = $1 AND {visible('p.hidden_at', 'u.principal_id', '$2', '$3')}",
            post_id,
            viewer,
            admin,
        )
        if row is None:
            return None
        return replace(_post(row), anchors=await anchor_store.of_post(pool, post_id))

    async def delete_post(self, post_id: uuid.UUID, actor: Actor) -> DeleteOutcome:
        """Deletes the note for its author, or for an admin with a reason (logged)."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT u.principal_id, p.title, p.hidden_at IS NOT NULL AS hidden "
                "FROM posts p JOIN users u ON u.id = p.author_id "
                "WHERE p.id = $1 FOR UPDATE OF p",
                post_id,
            )
            if row is None:
                return DeleteOutcome.NOT_FOUND
            author = row["principal_id"]
            if author != actor.principal_id:
                if not actor.admin:
                    # A hidden note does not exist for anyone but its author and admins.
                    return DeleteOutcome.NOT_FOUND if row["hidden"] else DeleteOutcome.NOT_AUTHOR
                if actor.reason is None:
                    return DeleteOutcome.NEEDS_REASON
                await _log(
                    conn,
                    actor.principal_id,
                    "delete",
                    actor.reason,
                    Moderated("post", post_id, post_id, author, row["title"]),
                )
            await conn.execute("DELETE FROM posts WHERE id = $1", post_id)
            return DeleteOutcome.DELETED

    async def set_post_hidden(
        self, post_id: uuid.UUID, moderator: str, hidden: bool, reason: str
    ) -> bool | None:
        """Hides or unhides a note and logs it; whether it changed, None if no such note."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT u.principal_id, p.title, p.hidden_at IS NOT NULL AS hidden "
                "FROM posts p JOIN users u ON u.id = p.author_id "
                "WHERE p.id = $1 FOR UPDATE OF p",
                post_id,
            )
            if row is None:
                return None
            if row["hidden"] == hidden:
                return False
            await conn.execute(
                "UPDATE posts SET hidden_at = CASE WHEN $2 THEN now() END WHERE id = $1",
                post_id,
                hidden,
            )
            action = "hide" if hidden else "unhide"
            await _log(
                conn,
                moderator,
                action,
                reason,
                Moderated("post", post_id, post_id, row["principal_id"], row["title"]),
            )
            return True

    @staticmethod
    async def _lock_comment(
        conn: asyncpg.Connection, comment_id: uuid.UUID
    ) -> asyncpg.Record | None:
        """The comment with its author, after locking its note's row then its own: the order
        add_comment takes (the note's comment_count changes with the comment)."""
        post_id = await conn.fetchval("SELECT post_id FROM comments WHERE id = $1", comment_id)
        if post_id is None:
            return None
        await conn.execute("SELECT 1 FROM posts WHERE id = $1 FOR UPDATE", post_id)
        return await conn.fetchrow(
            "SELECT c.post_id, c.body, c.hidden_at IS NOT NULL AS hidden, u.principal_id "
            "FROM comments c JOIN users u ON u.id = c.author_id WHERE c.id = $1 FOR UPDATE OF c",
            comment_id,
        )

    async def set_comment_hidden(
        self, comment_id: uuid.UUID, moderator: str, hidden: bool, reason: str
    ) -> bool | None:
        """Hides or unhides a comment and logs it; whether it changed, None if no such
        comment. The note's comment_count counts visible comments, so it follows."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await self._lock_comment(conn, comment_id)
            if row is None:
                return None
            if row["hidden"] == hidden:
                return False
            await conn.execute(
                "UPDATE comments SET hidden_at = CASE WHEN $2 THEN now() END WHERE id = $1",
                comment_id,
                hidden,
            )
            await conn.execute(
                "UPDATE posts SET comment_count = comment_count + $2 WHERE id = $1",
                row["post_id"],
                -1 if hidden else 1,
            )
            action = "hide" if hidden else "unhide"
            await _log(
                conn,
                moderator,
                action,
                reason,
                Moderated("comment", comment_id, row["post_id"], row["principal_id"], row["body"]),
            )
            return True

    async def delete_comment(self, comment_id: uuid.UUID, actor: Actor) -> DeleteOutcome:
        """Deletes a comment for its author, or for an admin with a reason (logged)."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await self._lock_comment(conn, comment_id)
            if row is None:
                return DeleteOutcome.NOT_FOUND
            author = row["principal_id"]
            if author != actor.principal_id:
                if not actor.admin:
                    return DeleteOutcome.NOT_FOUND if row["hidden"] else DeleteOutcome.NOT_AUTHOR
                if actor.reason is None:
                    return DeleteOutcome.NEEDS_REASON
                await _log(
                    conn,
                    actor.principal_id,
                    "delete",
                    actor.reason,
                    Moderated("comment", comment_id, row["post_id"], author, row["body"]),
                )
            await conn.execute("DELETE FROM comments WHERE id = $1", comment_id)
            if not row["hidden"]:
                await conn.execute(
                    "UPDATE posts SET comment_count = comment_count - 1 WHERE id = $1",
                    row["post_id"],
                )
            return DeleteOutcome.DELETED

    async def moderation_log(
        self, limit: int, before_id: int | None
    ) -> tuple[list[ModerationEntry], int | None]:
        """A page of the log, newest first, and the cursor for the next (None at the end)."""
        rows = await self._pool.fetch(
            "SELECT id, principal_id, action, target_kind, target_id, post_id, target_author, "
            "target_excerpt, reason, created_at FROM moderation_log "
            "WHERE $2::bigint IS NULL OR id < $2::bigint ORDER BY id DESC LIMIT $1",
            limit + 1,
            before_id,
        )
        entries = [
            ModerationEntry(
                id=row["id"],
                principal_id=row["principal_id"],
                action=row["action"],
                target=row["target_kind"],
                target_id=row["target_id"],
                post_id=row["post_id"],
                target_author=row["target_author"],
                target_excerpt=row["target_excerpt"],
                reason=row["reason"],
                created_at=row["created_at"],
            )
            for row in rows[:limit]
        ]
        return entries, (entries[-1].id if len(rows) > limit else None)

    async def vote(
        self, post_id: uuid.UUID, principal_id: str, value: int, admin: bool = False
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
            row = await conn.fetchrow(
                "SELECT author_id, hidden_at IS NOT NULL AS hidden FROM posts "
                "WHERE id = $1 FOR UPDATE",
                post_id,
            )
            if row is None or (row["hidden"] and not admin and row["author_id"] != voter):
                return VoteRefusal.NOT_FOUND
            author = row["author_id"]
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
        self, post_id: uuid.UUID, principal_id: str, body: str, admin: bool = False
    ) -> tuple[Comment, int] | None:
        """Adds a comment; None when the note does not exist or is hidden from the caller."""
        async with self._pool.acquire() as conn, conn.transaction():
            author = await self._user(conn, principal_id)
            count = await conn.fetchval(
                "UPDATE posts SET comment_count = comment_count + 1 "
                "WHERE id = $1 AND (hidden_at IS NULL OR $2::boolean OR author_id = $3) "
                "RETURNING comment_count",
                post_id,
                admin,
                author,
            )
            if count is None:
                return None
            row = await conn.fetchrow(
                "WITH c AS (INSERT INTO comments (post_id, author_id, body) "
                "VALUES ($1, $2, $3) RETURNING *) "
                f"SELECT {_COMMENT_COLUMNS} FROM c JOIN users u ON u.id = c.author_id",
                post_id,
                author,
                body,
            )
        assert row is not None
        return _comment(row), int(count)

    async def list_comments(
        self, post_id: uuid.UUID, viewer: str | None, admin: bool
    ) -> list[Comment] | None:
        """The comments this viewer may see (hidden ones: their authors and admins), oldest
        first; None when the note does not exist or is hidden from the viewer."""
        async with (await self._reader()).acquire() as conn, conn.transaction(readonly=True):
            exists = await conn.fetchval(
                "SELECT 1 FROM posts p JOIN users u ON u.id = p.author_id WHERE p.id = $1 "
                f"AND {visible('p.hidden_at', 'u.principal_id', '$2', '$3')}",
                post_id,
                viewer,
                admin,
            )
            if exists is None:
                return None
            rows = await conn.fetch(
                f"SELECT {_COMMENT_COLUMNS} FROM comments c JOIN users u ON u.id = c.author_id "
                f"WHERE c.post_id = $1 AND {visible('c.hidden_at', 'u.principal_id', '$2', '$3')} "
                "ORDER BY c.created_at, c.id",
                post_id,
                viewer,
                admin,
            )
        return [_comment(row) for row in rows]

    async def list_posts(
        self, page: ListPage, after: After | None, snippet: int, admin: bool
    ) -> list[PostSummary]:
        """Up to page.size + 1 notes in the page's order after `after` (one more than a page:
        the caller tells from it whether another page follows)."""
        sql, args = listing_query(page, after, snippet, admin)
        rows = await (await self._reader()).fetch(sql, *args)
        return [_summary(row) for row in rows]

    async def profile(self, principal_id: str) -> Profile:
        """The principal's number and display name; both None before their first write."""
        row = await self._pool.fetchrow(
            "SELECT contributor_no, display_name FROM users WHERE principal_id = $1",
            principal_id,
        )
        if row is None:
            return Profile(None, None)
        return Profile(row["contributor_no"], row["display_name"])

    async def set_display_name(self, principal_id: str, name: str | None) -> Profile | None:
        """Sets (or, with None, clears) the principal's display name, giving them a number
        if they had none; None when another contributor has the name (ignoring case)."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                user = await self._user(conn, principal_id)
                row = await conn.fetchrow(
                    "UPDATE users SET display_name = $2 WHERE id = $1 "
                    "RETURNING contributor_no, display_name",
                    user,
                    name,
                )
        except asyncpg.UniqueViolationError:
            return None
        assert row is not None
        return Profile(row["contributor_no"], row["display_name"])

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

    async def embedding_backlog(self) -> int:
        """Notes still without a vector (the backfill's work; posts_unembedded indexes them)."""
        return int(await self._pool.fetchval("SELECT count(*) FROM posts WHERE embedding IS NULL"))

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
                "SELECT count(*) FROM (SELECT 1 FROM posts p "
                "WHERE p.embedding IS NOT NULL AND p.hidden_at IS NULL"
                f"{phrase_filter(2, len(patterns))} LIMIT $1) s",
                cap + 1,
                *patterns,
            )
        return count

    async def search(self, params: SearchParams) -> list[SearchHit]:
        sql = search_sql(params.strategy, len(params.patterns), params.scope)
        async with (await self._reader()).acquire() as conn, conn.transaction(readonly=True):
            if params.strategy is Strategy.TWO_STAGE:
                await configure_two_stage(conn, params.k, filtered=bool(params.patterns))
            elif params.strategy is Strategy.FILTERED:
                await configure_filtered(conn)
            rows = await conn.fetch(sql, *search_args(params))
        return [SearchHit(**_hit_fields(row)) for row in rows]

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

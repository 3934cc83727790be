"""The SQL of notes' anchors (table post_anchors, migration 0007)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from cograph.retrieval.v1 import retrieval_pb2
from commons.models import Anchor, AnchoredNote, Place

_COLUMNS = """
    a.id, a.post_id, a.repository_id, a.repo, a.symbol, a.qualified_name, a.path,
    a.start_line, a.end_line, a.kind, a.signature_hash, a.body_hash, a.commit_sha, a.status,
    a.checked_commit, a.checked_generation, a.checked_at, a.moved_path, a.moved_qualified_name,
    a.moved_start_line, a.moved_end_line
"""


@dataclass(frozen=True)
class NewAnchor:
    """An anchor to store: the request's form and the node retrieval resolved it to."""

    symbol: str
    requested_path: str
    requested_start_line: int
    requested_end_line: int
    node: retrieval_pb2.AnchorNode


@dataclass(frozen=True)
class CheckedAnchor:
    """A stored anchor as a staleness check compares it (retrieval's StoredAnchor)."""

    id: uuid.UUID
    repository_id: int
    qualified_name: str
    path: str
    signature_hash: str
    body_hash: str


def anchor(row: asyncpg.Record) -> Anchor:
    moved = None
    if row["moved_path"] is not None:
        moved = Place(
            row["moved_path"],
            row["moved_qualified_name"],
            row["moved_start_line"],
            row["moved_end_line"],
        )
    return Anchor(
        id=row["id"],
        post_id=row["post_id"],
        repository_id=row["repository_id"],
        repo=row["repo"],
        symbol=row["symbol"],
        qualified_name=row["qualified_name"],
        path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        kind=row["kind"],
        signature_hash=row["signature_hash"],
        body_hash=row["body_hash"],
        commit=row["commit_sha"],
        status=row["status"],
        checked_commit=row["checked_commit"],
        checked_generation=row["checked_generation"],
        checked_at=row["checked_at"],
        moved_to=moved,
    )


async def insert(
    conn: asyncpg.Connection, post_id: uuid.UUID, anchors: Sequence[NewAnchor]
) -> None:
    """Stores resolved anchors, fresh at the commit they were resolved at."""
    await conn.executemany(
        "INSERT INTO post_anchors (post_id, repository_id, repo, symbol, requested_path, "
        "requested_start_line, requested_end_line, qualified_name, path, start_line, end_line, "
        "kind, signature_hash, body_hash, commit_sha, generation, checked_commit, "
        "checked_generation, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
        # clock_timestamp(), not the transaction's now(): a note's anchors are read back in
        # the order they were given (ORDER BY created_at), not in their random ids' order.
        "$12, $13, $14, $15, $16, $15, $16, clock_timestamp())",
        [
            (
                post_id,
                a.node.repository_id,
                a.node.repo,
                a.symbol,
                a.requested_path,
                a.requested_start_line,
                a.requested_end_line,
                a.node.qualified_name,
                a.node.path,
                a.node.start_line,
                a.node.end_line,
                a.node.kind,
                a.node.signature_hash,
                a.node.body_hash,
                a.node.commit,
                a.node.generation,
            )
            for a in anchors
        ],
    )


async def of_post(conn: asyncpg.Connection | asyncpg.Pool, post_id: uuid.UUID) -> list[Anchor]:
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM post_anchors a WHERE a.post_id = $1 ORDER BY a.created_at, a.id",
        post_id,
    )
    return [anchor(r) for r in rows]


async def count(conn: asyncpg.Connection, post_id: uuid.UUID) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM post_anchors WHERE post_id = $1", post_id))


async def one(pool: asyncpg.Pool, post_id: uuid.UUID, anchor_id: uuid.UUID) -> Anchor | None:
    row = await pool.fetchrow(
        f"SELECT {_COLUMNS} FROM post_anchors a WHERE a.post_id = $1 AND a.id = $2",
        post_id,
        anchor_id,
    )
    return anchor(row) if row is not None else None


async def confirm(
    pool: asyncpg.Pool, anchor_id: uuid.UUID, node: retrieval_pb2.AnchorNode
) -> Anchor:
    """The anchor now points at `node`, fresh at its commit."""
    row = await pool.fetchrow(
        "UPDATE post_anchors a SET qualified_name = $2, path = $3, start_line = $4, "
        "end_line = $5, kind = $6, signature_hash = $7, body_hash = $8, commit_sha = $9, "
        "generation = $10, checked_commit = $9, checked_generation = $10, checked_at = now(), "
        "status_changed_at = CASE WHEN a.status <> 'fresh' THEN now() "
        "ELSE a.status_changed_at END, status = 'fresh', moved_path = NULL, "
        "moved_qualified_name = NULL, moved_start_line = NULL, moved_end_line = NULL "
        f"WHERE a.id = $1 RETURNING {_COLUMNS}",
        anchor_id,
        node.qualified_name,
        node.path,
        node.start_line,
        node.end_line,
        node.kind,
        node.signature_hash,
        node.body_hash,
        node.commit,
        node.generation,
    )
    assert row is not None
    return anchor(row)


async def review(
    pool: asyncpg.Pool,
    repository_id: int,
    statuses: Sequence[str],
    limit: int,
    *,
    viewer: str | None,
    admin: bool,
) -> list[AnchoredNote]:
    """Anchors of one repository with these statuses and their notes, the longest-changed
    first; notes hidden from the viewer are left out. At most `limit` rows."""
    rows = await pool.fetch(
        f"SELECT {_COLUMNS}, p.title, p.score FROM post_anchors a "
        "JOIN posts p ON p.id = a.post_id JOIN users u ON u.id = p.author_id "
        "WHERE a.repository_id = $1 AND a.status = ANY($2::text[]) "
        "AND (p.hidden_at IS NULL OR $4::boolean OR (u.principal_id = $5::text) IS TRUE) "
        "ORDER BY a.status_changed_at, a.id LIMIT $3",
        repository_id,
        list(statuses),
        limit,
        admin,
        viewer,
    )
    return [AnchoredNote(r["post_id"], r["title"], int(r["score"]), anchor(r)) for r in rows]


# ---------------------------------------------------------------- staleness checks


async def repositories(pool: asyncpg.Pool, limit: int) -> list[tuple[int, int]]:
    """(repository id, oldest generation checked) of every repository with anchors."""
    rows = await pool.fetch(
        "SELECT repository_id, min(checked_generation) AS checked FROM post_anchors "
        "GROUP BY repository_id ORDER BY repository_id LIMIT $1",
        limit,
    )
    return [(int(r["repository_id"]), int(r["checked"])) for r in rows]


async def behind(
    pool: asyncpg.Pool, repository_id: int, generation: int, limit: int
) -> list[CheckedAnchor]:
    """Anchors of a repository last checked before `generation`."""
    rows = await pool.fetch(
        "SELECT id, repository_id, qualified_name, path, signature_hash, body_hash "
        "FROM post_anchors WHERE repository_id = $1 AND checked_generation < $2 "
        "ORDER BY checked_generation, id LIMIT $3",
        repository_id,
        generation,
        limit,
    )
    return [
        CheckedAnchor(
            r["id"],
            int(r["repository_id"]),
            r["qualified_name"],
            r["path"],
            r["signature_hash"],
            r["body_hash"],
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Verdict:
    """What a check found for one anchor: its status, where its code is now (None when
    orphaned) and the published index it was compared with."""

    anchor: CheckedAnchor
    status: str
    current: retrieval_pb2.AnchorNode | None
    commit: str
    generation: int


async def record(pool: asyncpg.Pool, verdicts: Sequence[Verdict]) -> int:
    """Stores each verdict, unless the anchor was confirmed or changed meanwhile (the row
    no longer holds what was compared); how many anchors changed status."""
    changed = 0
    async with pool.acquire() as conn, conn.transaction():
        for v in verdicts:
            node = v.current
            moved = node if v.status == "moved" else None
            fresh = node if v.status == "fresh" else None
            result = await conn.fetchval(
                "UPDATE post_anchors a SET "
                "status_changed_at = CASE WHEN a.status <> $6 THEN now() "
                "ELSE a.status_changed_at END, "
                "status = $6, checked_commit = $7, checked_generation = $8, checked_at = now(), "
                "start_line = coalesce($9, a.start_line), end_line = coalesce($10, a.end_line), "
                "moved_path = $11, moved_qualified_name = $12, moved_start_line = $13, "
                "moved_end_line = $14 "
                "WHERE a.id = $1 AND a.qualified_name = $2 AND a.path = $3 "
                "AND a.signature_hash = $4 AND a.body_hash = $5 AND a.checked_generation <= $8 "
                "RETURNING (SELECT b.status FROM post_anchors b WHERE b.id = a.id) <> $6",
                v.anchor.id,
                v.anchor.qualified_name,
                v.anchor.path,
                v.anchor.signature_hash,
                v.anchor.body_hash,
                v.status,
                v.commit,
                v.generation,
                fresh.start_line if fresh is not None else None,
                fresh.end_line if fresh is not None else None,
                moved.path if moved is not None else None,
                moved.qualified_name if moved is not None else None,
                moved.start_line if moved is not None else None,
                moved.end_line if moved is not None else None,
            )
            changed += bool(result)
    return changed


async def orphan_repository(pool: asyncpg.Pool, repository_id: int) -> int:
    """Every anchor of a repository that no longer exists is orphaned; how many changed."""
    status: str = await pool.execute(
        "UPDATE post_anchors SET status = 'orphaned', status_changed_at = now(), "
        "checked_at = now(), moved_path = NULL, moved_qualified_name = NULL, "
        "moved_start_line = NULL, moved_end_line = NULL "
        "WHERE repository_id = $1 AND status <> 'orphaned'",
        repository_id,
    )
    return int(status.rsplit(" ", 1)[-1])

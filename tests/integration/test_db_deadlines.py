"""The deadlines of svckit's pools against the real PostgreSQL: statements cancelled by the
server, acquisitions that give up, the indexer's longer budget, recovery from a connection
the server dropped, and how each failure maps to UNAVAILABLE."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import grpc
import pytest

from svckit.db import DbTimeouts, create_pool
from svckit.errors import DATABASE_UNAVAILABLE, DatabaseUnavailable, database_outage

pytestmark = pytest.mark.asyncio(loop_scope="session")

SHORT = DbTimeouts(connect_s=5, acquire_s=0.5, statement_s=0.5, index_statement_s=600)


async def test_the_server_cancels_a_statement_past_its_budget(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url, max_size=2, timeouts=SHORT)
    try:
        start = time.monotonic()
        with pytest.raises(asyncpg.QueryCanceledError) as caught:
            await pool.fetchval("SELECT pg_sleep(5)")
        assert time.monotonic() - start < 2
        outage = database_outage(caught.value)
        assert outage is not None and outage.code == grpc.StatusCode.UNAVAILABLE
        assert outage.reason == DATABASE_UNAVAILABLE
        # The budget is a startup setting: the pool's reset (RESET ALL) keeps it.
        for _ in range(3):
            async with pool.acquire() as conn:
                await conn.execute("SET statement_timeout = 0")
            assert await pool.fetchval("SHOW statement_timeout") == "500ms"
    finally:
        await pool.close()


async def test_acquiring_gives_up_with_database_unavailable(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url, min_size=1, max_size=1, timeouts=SHORT)
    try:
        async with pool.acquire():
            start = time.monotonic()
            with pytest.raises(DatabaseUnavailable, match=r"no connection within 0\.5 s"):
                async with pool.acquire():
                    pass
            assert 0.4 < time.monotonic() - start < 2
        assert await pool.fetchval("SELECT 1") == 1  # the held connection came back
    finally:
        await pool.close()


async def test_the_indexers_budget_is_longer(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url, max_size=1, timeouts=SHORT.for_indexing())
    try:
        assert await pool.fetchval("SHOW statement_timeout") == "10min"
        assert await pool.fetchval("SELECT pg_sleep(1)::text") == ""  # past the short budget
    finally:
        await pool.close()


async def test_a_connection_the_server_dropped_is_replaced(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url, min_size=1, max_size=1, timeouts=SHORT)
    try:
        pid = await pool.fetchval("SELECT pg_backend_pid()")
        admin = await asyncpg.connect(fresh_db_url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        await asyncio.sleep(0.2)
        # asyncpg saw the server close it; the pool connects anew instead of failing.
        assert await pool.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await pool.close()


async def test_sql_errors_are_not_outages(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url, max_size=1, timeouts=SHORT)
    try:
        with pytest.raises(asyncpg.PostgresError) as caught:
            await pool.fetchval("SELECT 1/0")
        assert database_outage(caught.value) is None
        assert database_outage(TimeoutError("not from asyncpg")) is None
        assert database_outage(OSError("a git clone")) is None
        group = ExceptionGroup("streams", [ValueError("x"), DatabaseUnavailable("gone")])
        found = database_outage(group)
        assert found is not None and found.message == "gone"
    finally:
        await pool.close()

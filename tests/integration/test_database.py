"""The real PostgreSQL: extensions, the pool's vector codec, migrations under concurrency,
and the embedded server keeping its data across restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from svckit.db import MissingExtensionError, create_pool, ensure_extensions
from svckit.embedded import EmbeddedPostgres
from svckit.migrations import MigrationError, migrate

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, sql in files.items():
        (folder / name).write_text(sql)
    return folder


async def test_pool_round_trips_vectors(fresh_db_url: str) -> None:
    pool = await create_pool(fresh_db_url)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE t (v vector(3))")
            await conn.execute("INSERT INTO t VALUES ($1)", np.array([1.0, 2.0, 3.0]))
            value = await conn.fetchval("SELECT v FROM t")
        assert value.to_list() == [1.0, 2.0, 3.0]
    finally:
        await pool.close()


async def _probe(pool: asyncpg.Pool) -> str:
    async with pool.acquire() as conn:
        return str(await conn.fetchval("SELECT current_setting('cograph.probe', true)"))


async def test_only_a_connection_marked_clean_skips_the_pools_reset(fresh_db_url: str) -> None:
    """The reset (RESET ALL and the rest) runs on every release but the one after
    mark_clean outside a transaction; a session setting shows which ran."""
    pool = await create_pool(fresh_db_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET cograph.probe = 'left'")
        assert await _probe(pool) == ""  # not marked: reset
        async with pool.acquire() as conn:
            await conn.execute("SET cograph.probe = 'left'")
            conn.mark_clean()
        assert await _probe(pool) == "left"  # marked: the reset was skipped
        assert await _probe(pool) == ""  # once: the probe's own release was not marked
        # Marked inside a transaction: the reset runs (and rolls it back) all the same.
        async with pool.acquire() as conn:
            await conn.execute("BEGIN; SET cograph.probe = 'in a transaction'")
            conn.mark_clean()
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT current_setting('cograph.probe', true)") == ""
    finally:
        await pool.close()


async def test_extensions_are_present(fresh_db_url: str) -> None:
    await ensure_extensions(fresh_db_url)  # idempotent
    conn = await asyncpg.connect(fresh_db_url)
    try:
        names = {r["extname"] for r in await conn.fetch("SELECT extname FROM pg_extension")}
    finally:
        await conn.close()
    assert {"vector", "pg_trgm"} <= names


async def test_missing_extension_fails_clearly(fresh_db_url: str) -> None:
    conn = await asyncpg.connect(fresh_db_url)
    try:
        await conn.execute("DROP EXTENSION vector")
        await conn.execute("CREATE ROLE limited LOGIN")
    finally:
        await conn.close()
    limited = fresh_db_url.replace("postgres:@", "limited:@", 1)
    with pytest.raises(MissingExtensionError, match="'vector' is not installed"):
        await ensure_extensions(limited)


async def test_migrations_apply_once_even_with_concurrent_replicas(
    fresh_db_url: str, tmp_path: Path
) -> None:
    folder = _write(
        tmp_path / "m",
        {
            "0001_create.sql": "CREATE TABLE items (id int PRIMARY KEY);",
            # Not idempotent on purpose: running twice would fail with duplicate key.
            "0002_seed.sql": "INSERT INTO items VALUES (1), (2);",
        },
    )
    results = await asyncio.gather(*(migrate(fresh_db_url, "svc", folder) for _ in range(6)))
    assert sorted(map(tuple, results)) == [(), (), (), (), (), (1, 2)]
    conn = await asyncpg.connect(fresh_db_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM items") == 2
        rows = await conn.fetch("SELECT version FROM cograph_migrations WHERE service = 'svc'")
        assert sorted(r["version"] for r in rows) == [1, 2]
    finally:
        await conn.close()


async def test_new_migrations_apply_later_and_edits_are_refused(
    fresh_db_url: str, tmp_path: Path
) -> None:
    folder = _write(tmp_path / "m", {"0001_create.sql": "CREATE TABLE a (id int);"})
    assert await migrate(fresh_db_url, "svc", folder) == [1]
    _write(folder, {"0002_more.sql": "CREATE TABLE b (id int);"})
    assert await migrate(fresh_db_url, "svc", folder) == [2]
    _write(folder, {"0001_create.sql": "CREATE TABLE a (id bigint);"})
    with pytest.raises(MigrationError, match="edited after it was applied"):
        await migrate(fresh_db_url, "svc", folder)


async def test_a_schema_newer_than_the_release_is_refused(
    fresh_db_url: str, tmp_path: Path
) -> None:
    newer = _write(
        tmp_path / "newer",
        {"0001_create.sql": "CREATE TABLE n1 (id int);", "0002_more.sql": "CREATE TABLE n2 ();"},
    )
    assert await migrate(fresh_db_url, "svc_newer", newer) == [1, 2]
    older = _write(tmp_path / "older", {"0001_create.sql": "CREATE TABLE n1 (id int);"})
    with pytest.raises(MigrationError, match="at version 0002, newer than this release's 0001"):
        await migrate(fresh_db_url, "svc_newer", older)
    # Another service's versions are its own business.
    other = _write(tmp_path / "other", {"0001_create.sql": "CREATE TABLE o1 (id int);"})
    assert await migrate(fresh_db_url, "svc_other", other) == [1]


async def test_failed_migration_leaves_nothing_half_applied(
    fresh_db_url: str, tmp_path: Path
) -> None:
    folder = _write(
        tmp_path / "m",
        {"0001_bad.sql": "CREATE TABLE c (id int); SELECT no_such_function();"},
    )
    with pytest.raises(asyncpg.PostgresError):
        await migrate(fresh_db_url, "svc", folder)
    conn = await asyncpg.connect(fresh_db_url)
    try:
        assert await conn.fetchval("SELECT to_regclass('c')") is None
        assert await conn.fetchval("SELECT count(*) FROM cograph_migrations") == 0
    finally:
        await conn.close()


async def test_embedded_postgres_keeps_data_between_runs(pg_home: Path) -> None:
    loop = asyncio.get_running_loop()
    server = EmbeddedPostgres(pg_home / "pg")
    url = await loop.run_in_executor(None, server.start)
    conn = await asyncpg.connect(url)
    await conn.execute("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
    await conn.close()
    await loop.run_in_executor(None, server.stop)

    again = EmbeddedPostgres(pg_home / "pg")
    url = await loop.run_in_executor(None, again.start)
    try:
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("SELECT v FROM kept") == "still here"
        await conn.close()
    finally:
        await loop.run_in_executor(None, again.stop)

"""The integration tests' fixtures, all of them shared through this file (the helpers they
use are plain code in `tests/integration/support/`).

Session-wide: the real PostgreSQL (embedded; set COGRAPH_TEST_DATABASE_URL to run against an
existing server instead) and the real embedder, each started once. Per module: the indexed
search corpus. Per test: a fresh database, a migrated retrieval pool, a running commons.
Unit tests see none of this: they start no database and load no model.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from cograph_api.embedder_client import EmbedderClient
from embedder.app import EmbedderApp, start_embedder
from retrieval.app import MIGRATIONS
from svckit.db import create_pool
from svckit.embedded import EmbeddedPostgres
from svckit.migrations import migrate
from tests.integration.support.commons import Running, commons_settings, running_commons
from tests.integration.support.databases import fresh_database
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.pg_home import server_home
from tests.integration.support.retrieval import SearchEnv, serving
from tests.integration.support.search_corpus import index_corpus, make_corpus
from tests.internal_auth import signed_channel

# ---- session: one PostgreSQL server, one embedder -------------------------------------------


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of the session's PostgreSQL server (the maintenance database)."""
    external = os.environ.get("COGRAPH_TEST_DATABASE_URL")
    if external:
        yield external
        return
    # Outside pytest's base temporary directory, so that another pytest run cannot lock
    # the server out of its data (support/pg_home.py).
    with server_home() as home:
        server = EmbeddedPostgres(home / "data")
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture
def pg_home() -> Iterator[Path]:
    """A private directory, removed after the test, for a test that starts a PostgreSQL of
    its own (an EmbeddedPostgres, `cograph up`): never under tmp_path, whose base another
    pytest run re-tightens, locking the server's user out of its data (support/pg_home.py)."""
    with server_home() as home:
        yield home


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def embedder_app() -> AsyncIterator[EmbedderApp]:
    """The real embedder (packaged all-MiniLM-L6-v2, default backend) on 127.0.0.1:0."""
    app = await start_embedder(embedder_settings())
    try:
        yield app
    finally:
        await app.stop()


@pytest.fixture(scope="session")
def embedder_address(embedder_app: EmbedderApp) -> str:
    return f"127.0.0.1:{embedder_app.port}"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def embedder_client(embedder_address: str) -> AsyncIterator[EmbedderClient]:
    channel = signed_channel(embedder_address)
    try:
        yield EmbedderClient(channel, timeout_s=10.0)
    finally:
        await channel.close(None)


# ---- per module: the search corpus, indexed -------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def search_env(
    pg_server_url: str,
    embedder_address: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> AsyncIterator[SearchEnv]:
    """The demo, vault and handbook indexed through a real retrieval service, on a database
    of the module's own. A module may set SEARCH_SETTINGS (retrieval settings by name) for
    its service."""
    extra: dict[str, str] = getattr(request.module, "SEARCH_SETTINGS", {})
    async with fresh_database(pg_server_url, prefix="s") as db_url:
        base = tmp_path_factory.mktemp("search")
        demo, vault, handbook = make_corpus(base)
        async with serving(db_url, base / "data", embedder_address, **extra) as (app, stub):
            await index_corpus(stub, demo, vault, handbook)
            yield SearchEnv(db_url, base / "data", embedder_address, app, stub, app.pool)


# ---- per test ---------------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_db_url(pg_server_url: str) -> AsyncIterator[str]:
    """A new database per test."""
    async with fresh_database(pg_server_url) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="session")
async def retrieval_pool(fresh_db_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a fresh database migrated for retrieval."""
    await migrate(fresh_db_url, "retrieval", MIGRATIONS)
    pool = await create_pool(fresh_db_url)
    try:
        yield pool
    finally:
        await pool.close()


@pytest_asyncio.fixture(loop_scope="session")
async def commons(
    fresh_db_url: str, embedder_address: str, request: pytest.FixtureRequest
) -> AsyncIterator[Running]:
    """A running commons service on a fresh database. A module may set COMMONS_SETTINGS
    (commons settings by name) for it."""
    extra: dict[str, str] = getattr(request.module, "COMMONS_SETTINGS", {})
    async with running_commons(commons_settings(fresh_db_url, embedder_address, **extra)) as c:
        yield c

"""Session fixtures: the real PostgreSQL (embedded) and the real embedder, started once.

Set COGRAPH_TEST_DATABASE_URL to run against an existing server instead of the embedded one.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from cograph_api.embedder_client import EmbedderClient
from embedder.app import EmbedderApp, start_embedder
from embedder.settings import EmbedderSettings
from svckit.config import Env
from svckit.db import create_database, drop_database
from svckit.embedded import EmbeddedPostgres
from tests.internal_auth import signed_channel, with_secret

REPO_ROOT = Path(__file__).resolve().parent.parent
# Kept between runs so the ONNX export happens once per machine, not once per test session.
MODEL_CACHE = REPO_ROOT / ".cograph" / "test-models"


@pytest.fixture(scope="session")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session's PostgreSQL server (the maintenance database)."""
    external = os.environ.get("COGRAPH_TEST_DATABASE_URL")
    if external:
        yield external
        return
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def fresh_database(pg_server_url: str, prefix: str = "t") -> AsyncIterator[str]:
    """A new, empty database with the extensions, dropped (forcibly) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = await create_database(pg_server_url, name)
    try:
        yield url
    finally:
        await drop_database(pg_server_url, name)


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_db_url(pg_server_url: str) -> AsyncIterator[str]:
    """A new database per test."""
    async with fresh_database(pg_server_url) as url:
        yield url


def embedder_settings(**overrides: str) -> EmbedderSettings:
    environ = {
        "EMBEDDER_LISTEN": "127.0.0.1:0",
        "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
        **overrides,
    }
    return EmbedderSettings.from_env(Env(with_secret(environ)))


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

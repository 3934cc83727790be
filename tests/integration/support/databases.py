"""Databases on the session's PostgreSQL server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

from svckit.db import create_database, drop_database


@contextlib.asynccontextmanager
async def fresh_database(pg_server_url: str, prefix: str = "t") -> AsyncIterator[str]:
    """A new, empty database with the extensions, dropped (forcibly) afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = await create_database(pg_server_url, name)
    try:
        yield url
    finally:
        await drop_database(pg_server_url, name)

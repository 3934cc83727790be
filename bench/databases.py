"""The PostgreSQL a benchmark runs against: the server at COGRAPH_DATABASE_URL, or an
embedded one started in a temporary directory; and a scratch database on it, created for
the run and dropped after it."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from svckit.db import create_database, drop_database
from svckit.embedded import EmbeddedPostgres, cancelled_by_sigterm


@contextmanager
def postgres_server(workdir: Path) -> Iterator[str]:
    """The maintenance URL of COGRAPH_DATABASE_URL's server, or of an embedded server with
    its data under `workdir` (stopped on exit)."""
    external = os.environ.get("COGRAPH_DATABASE_URL")
    if external:
        yield external
        return
    server = EmbeddedPostgres(workdir / "pg")
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


@asynccontextmanager
async def scratch_database(prefix: str, *, keep: bool = False) -> AsyncIterator[str]:
    """A new database `<prefix>_<random>` (extensions created), dropped on exit unless
    `keep` on an external server (an embedded one goes with its directory anyway)."""
    with (
        cancelled_by_sigterm(),
        tempfile.TemporaryDirectory(prefix=f"{prefix}-") as tmp,
        postgres_server(Path(tmp)) as base,
    ):
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        url = await create_database(base, name)
        try:
            yield url
        finally:
            if not keep or not os.environ.get("COGRAPH_DATABASE_URL"):
                await drop_database(base, name)

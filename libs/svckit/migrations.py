"""Ordered SQL migrations per service, applied once, safe with many replicas starting at once.

Files are named `NNNN_description.sql` in a service's `migrations/` folder. Each is applied
in its own transaction and recorded in `cograph_migrations`; a session-level advisory lock
serialises concurrent runners, and a runner that waited re-reads what is applied, so every
replica can run migrations on start-up without coordination.

A release knows the schema it needs: its own migrations. A database that has a version
this release does not have was migrated by a newer release, and this one refuses to run on
it (MigrationError naming both versions) rather than write rows the newer schema forbids.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

log = logging.getLogger(__name__)

# Arbitrary, fixed: every Cograph process that migrates takes this one lock.
ADVISORY_LOCK_KEY = 0x636F6772  # "cogr"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """A migration folder or history is inconsistent."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(folder: Path) -> list[Migration]:
    """Reads a migrations folder, rejecting misnamed files and duplicate versions."""
    found: dict[int, Migration] = {}
    for path in sorted(folder.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files must be named NNNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path}: duplicate migration version {version:04d}")
        found[version] = Migration(version, match.group(2), path.read_text())
    return [found[v] for v in sorted(found)]


_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS cograph_migrations (
    service    text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service, version)
)
"""


def check_not_newer(service: str, applied: Iterable[int], known: list[Migration]) -> None:
    """Raises when the database holds a migration of `service` that this release lacks."""
    versions = {m.version for m in known}
    unknown = sorted(set(applied) - versions)
    if unknown:
        needs = max(versions, default=0)
        raise MigrationError(
            f"the database's {service} schema is at version {max(unknown):04d}, newer than "
            f"this release's {needs:04d}: it was upgraded by a newer Cograph release; run "
            "that release (or restore a backup taken before the upgrade)"
        )


async def apply_migrations(conn: asyncpg.Connection, service: str, folder: Path) -> list[int]:
    """Applies the service's pending migrations; returns the versions applied now."""
    migrations = load_migrations(folder)
    await conn.execute("SELECT pg_advisory_lock($1)", ADVISORY_LOCK_KEY)
    try:
        await conn.execute(_BOOKKEEPING)
        rows = await conn.fetch(
            "SELECT version, checksum FROM cograph_migrations WHERE service = $1", service
        )
        applied = {row["version"]: row["checksum"] for row in rows}
        check_not_newer(service, applied, migrations)
        done: list[int] = []
        for migration in migrations:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    raise MigrationError(
                        f"{service} migration {migration.version:04d}_{migration.name} was "
                        "edited after it was applied; add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO cograph_migrations (service, version, name, checksum) "
                    "VALUES ($1, $2, $3, $4)",
                    service,
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            log.info(
                "migration applied",
                extra={
                    "service": service,
                    "version": migration.version,
                    "migration": migration.name,
                },
            )
            done.append(migration.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", ADVISORY_LOCK_KEY)


async def migrate(dsn: str, service: str, folder: Path) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        return await apply_migrations(conn, service, folder)
    finally:
        await conn.close()

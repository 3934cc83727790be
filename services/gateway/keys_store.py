"""API keys: creation, lookup by hash, listing, revocation, and the first admin key.

A key is `cg_` + 43 url-safe characters (32 random bytes). Only its SHA-256 is stored,
so a leaked database does not leak usable keys; the secret is shown once, at creation.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import asyncpg

from svckit.migrations import migrate

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
KEY_PREFIX = "cg_"
ADMIN_KEY_FILE = "admin.key"
# Serialises the first-admin bootstrap across replicas starting at once.
_BOOTSTRAP_LOCK = 0x636F6B79  # "coky"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    principal_id: str
    admin: bool
    key_prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> ApiKey:
        return cls(
            id=str(row["id"]),
            name=row["name"],
            principal_id=row["principal_id"],
            admin=row["admin"],
            key_prefix=row["key_prefix"],
            created_at=row["created_at"],
            last_used_at=row["last_used_at"],
            revoked_at=row["revoked_at"],
        )

    def to_json(self) -> dict[str, Any]:
        def iso(moment: datetime | None) -> str | None:
            return moment.isoformat().replace("+00:00", "Z") if moment else None

        return {
            "id": self.id,
            "name": self.name,
            "principal_id": self.principal_id,
            "admin": self.admin,
            "key_prefix": self.key_prefix,
            "created_at": iso(self.created_at),
            "last_used_at": iso(self.last_used_at),
            "revoked_at": iso(self.revoked_at),
        }


_COLUMNS = "id, name, principal_id, admin, key_prefix, created_at, last_used_at, revoked_at"


async def _insert(
    conn: asyncpg.Connection, name: str, principal_id: str, admin: bool
) -> tuple[ApiKey, str]:
    secret = generate_key()
    row = await conn.fetchrow(
        f"INSERT INTO api_keys (id, name, principal_id, admin, key_hash, key_prefix) "
        f"VALUES ($1, $2, $3, $4, $5, $6) RETURNING {_COLUMNS}",
        uuid.uuid4(),
        name,
        principal_id,
        admin,
        hash_key(secret),
        secret[: len(KEY_PREFIX) + 6],
    )
    assert row is not None
    return ApiKey.from_row(row), secret


class KeysStore:
    """The api_keys table behind one pool."""

    def __init__(self, pool: asyncpg.Pool, last_used_resolution_s: float = 60.0) -> None:
        self._pool = pool
        self._resolution_s = last_used_resolution_s

    async def create(self, name: str, principal_id: str, admin: bool) -> tuple[ApiKey, str]:
        """Stores a new key; returns it and its secret (the only time the secret exists)."""
        async with self._pool.acquire() as conn:
            return await _insert(conn, name, principal_id, admin)

    async def authenticate(self, secret: str) -> ApiKey | None:
        """The active key with this secret, or None; touches last_used_at now and then."""
        if not secret.startswith(KEY_PREFIX) or len(secret) > 200:
            return None
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
                hash_key(secret),
            )
            if row is None:
                return None
            key = ApiKey.from_row(row)
            # Written at most once per resolution window: a write per request would turn
            # every read into a row update.
            await conn.execute(
                "UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND "
                "(last_used_at IS NULL OR last_used_at < now() - make_interval(secs => $2))",
                row["id"],
                self._resolution_s,
            )
            return key

    async def list(self) -> list[ApiKey]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id")
        return [ApiKey.from_row(row) for row in rows]

    async def get(self, key_id: str) -> ApiKey | None:
        try:
            ident = uuid.UUID(key_id)
        except ValueError:
            return None
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM api_keys WHERE id = $1", ident)
        return ApiKey.from_row(row) if row else None

    async def revoke(self, key_id: str) -> ApiKey | None:
        """Revokes a key (idempotent); None when no such key exists."""
        try:
            ident = uuid.UUID(key_id)
        except ValueError:
            return None
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                f"UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 "
                f"RETURNING {_COLUMNS}",
                ident,
            )
        return ApiKey.from_row(row) if row else None


def _write_secret(path: Path, secret: str) -> None:
    """Writes the key readable by its owner only, atomically, never briefly world-readable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.replace(tmp, path)


async def ensure_admin_key(dsn: str, data_dir: Path) -> str | None:
    """Creates the first admin key when no active one exists.

    Writes it to `data_dir/admin.key` (mode 0600) and returns it so the caller can print it
    once; returns None when an active admin key already exists. Applies the gateway's
    migrations first, so it is safe to call before the gateway has ever started.
    """
    await migrate(dsn, "gateway", MIGRATIONS)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _BOOTSTRAP_LOCK)
            exists = await conn.fetchval(
                "SELECT 1 FROM api_keys WHERE admin AND revoked_at IS NULL LIMIT 1"
            )
            if exists:
                return None
            key, secret = await _insert(conn, "admin", "admin", True)
            # Written inside the transaction: if the file cannot be written, no key exists
            # that nobody could ever read.
            _write_secret(data_dir / ADMIN_KEY_FILE, secret)
    finally:
        await conn.close()
    log.info("admin key created", extra={"key_id": key.id})
    return secret


# A key an operator provides (Kubernetes: the `cograph-admin` Secret) must look like one this
# module generates: the prefix authenticate() requires, then enough url-safe randomness.
PROVIDED_KEY_MIN_RANDOM = 32
MAX_KEY_CHARS = 200  # authenticate() refuses anything longer
_PROVIDED_KEY = re.compile(r"[A-Za-z0-9_-]+")


class BootstrapOutcome(Enum):
    CREATED = "created"
    EXISTS = "exists"  # the same key is already stored and active: nothing to do
    REVOKED = "revoked"  # the same key was stored and later revoked: it stays revoked


def check_provided_key(secret: str) -> str:
    """The key without surrounding whitespace; ValueError (never quoting it) if unusable."""
    key = secret.strip()
    random_part = key[len(KEY_PREFIX) :]
    if not key.startswith(KEY_PREFIX):
        raise ValueError(f"the key must start with {KEY_PREFIX!r}")
    if len(random_part) < PROVIDED_KEY_MIN_RANDOM:
        raise ValueError(
            f"the key is too short: at least {PROVIDED_KEY_MIN_RANDOM} characters after "
            f"{KEY_PREFIX!r} (got {len(random_part)})"
        )
    if len(key) > MAX_KEY_CHARS:
        raise ValueError(f"the key is too long: at most {MAX_KEY_CHARS} characters")
    if not _PROVIDED_KEY.fullmatch(random_part):
        raise ValueError("the key may only hold letters, digits, '-' and '_'")
    return key


async def bootstrap_admin_key(
    dsn: str, secret: str, name: str = "admin", principal_id: str = "admin"
) -> tuple[BootstrapOutcome, str]:
    """Stores an operator-provided admin key (hashed) unless that key is already stored.

    Idempotent: run on every gateway start, it changes nothing once the key exists, and a
    key an admin revoked is not brought back. Applies the gateway's migrations first, like
    ensure_admin_key. Returns the outcome and the key's id; the secret is never logged.
    """
    key = check_provided_key(secret)
    await migrate(dsn, "gateway", MIGRATIONS)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _BOOTSTRAP_LOCK)
            row = await conn.fetchrow(
                "SELECT id, revoked_at FROM api_keys WHERE key_hash = $1", hash_key(key)
            )
            if row is not None:
                outcome = BootstrapOutcome.EXISTS
                if row["revoked_at"] is not None:
                    outcome = BootstrapOutcome.REVOKED
                return outcome, str(row["id"])
            key_id = await conn.fetchval(
                "INSERT INTO api_keys (id, name, principal_id, admin, key_hash, key_prefix) "
                "VALUES ($1, $2, $3, true, $4, $5) RETURNING id",
                uuid.uuid4(),
                name,
                principal_id,
                hash_key(key),
                key[: len(KEY_PREFIX) + 6],
            )
    finally:
        await conn.close()
    log.info("provided admin key stored", extra={"key_id": str(key_id)})
    return BootstrapOutcome.CREATED, str(key_id)

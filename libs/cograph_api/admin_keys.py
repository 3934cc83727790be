"""Admin API keys written straight into the gateway's `api_keys` table, by the operator.

`cograph up` creates the first admin key (ensure_admin_key) and `cograph keys bootstrap`
stores one an operator provides (bootstrap_admin_key); both run before or beside the
gateway, so they apply its migrations first (the caller passes the gateway's migrations
folder). The gateway's own key store generates and hashes keys with the functions here, so
a key has one format.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import uuid
from enum import Enum
from pathlib import Path

import asyncpg

from svckit.migrations import migrate

log = logging.getLogger(__name__)

KEY_PREFIX = "cg_"
ADMIN_KEY_FILE = "admin.key"
# Serialises the first-admin bootstrap across replicas starting at once.
_BOOTSTRAP_LOCK = 0x636F6B79  # "coky"


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


async def _insert_admin(conn: asyncpg.Connection, secret: str, name: str, principal_id: str) -> str:
    """Stores an admin key (its hash and its visible prefix); returns its id."""
    key_id = await conn.fetchval(
        "INSERT INTO api_keys (id, name, principal_id, admin, key_hash, key_prefix) "
        "VALUES ($1, $2, $3, true, $4, $5) RETURNING id",
        uuid.uuid4(),
        name,
        principal_id,
        hash_key(secret),
        secret[: len(KEY_PREFIX) + 6],
    )
    return str(key_id)


def _write_secret(path: Path, secret: str) -> None:
    """Writes the key readable by its owner only, atomically, never briefly world-readable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.replace(tmp, path)


async def ensure_admin_key(dsn: str, data_dir: Path, migrations: Path) -> str | None:
    """Creates the first admin key when no active one exists.

    Writes it to `data_dir/admin.key` (mode 0600) and returns it so the caller can print it
    once; returns None when an active admin key already exists. Applies the gateway's
    migrations (`migrations`, its folder) first, so it is safe to call before the gateway has
    ever started.
    """
    await migrate(dsn, "gateway", migrations)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _BOOTSTRAP_LOCK)
            exists = await conn.fetchval(
                "SELECT 1 FROM api_keys WHERE admin AND revoked_at IS NULL LIMIT 1"
            )
            if exists:
                return None
            secret = generate_key()
            key_id = await _insert_admin(conn, secret, "admin", "admin")
            # Written inside the transaction: if the file cannot be written, no key exists
            # that nobody could ever read.
            _write_secret(data_dir / ADMIN_KEY_FILE, secret)
    finally:
        await conn.close()
    log.info("admin key created", extra={"key_id": key_id})
    return secret


# A key an operator provides (Kubernetes: the `cograph-admin` Secret) must look like one this
# module generates: the prefix authenticate() requires, then enough url-safe randomness.
PROVIDED_KEY_MIN_RANDOM = 32
MAX_KEY_CHARS = 200  # the gateway refuses anything longer
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
    dsn: str, secret: str, migrations: Path, name: str = "admin", principal_id: str = "admin"
) -> tuple[BootstrapOutcome, str]:
    """Stores an operator-provided admin key (hashed) unless that key is already stored.

    Idempotent: run on every gateway start, it changes nothing once the key exists, and a
    key an admin revoked is not brought back. Applies the gateway's migrations first, like
    ensure_admin_key. Returns the outcome and the key's id; the secret is never logged.
    """
    key = check_provided_key(secret)
    await migrate(dsn, "gateway", migrations)
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
            key_id = await _insert_admin(conn, key, name, principal_id)
    finally:
        await conn.close()
    log.info("provided admin key stored", extra={"key_id": str(key_id)})
    return BootstrapOutcome.CREATED, str(key_id)

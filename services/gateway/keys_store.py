"""API keys: creation, lookup by hash, listing, revocation, and the first admin key.

A key is `cg_` + 43 url-safe characters (32 random bytes). Only its SHA-256 is stored,
so a leaked database does not leak usable keys; the secret is shown once, at creation.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from cograph_api.admin_keys import KEY_PREFIX, MAX_KEY_CHARS, generate_key, hash_key
from svckit.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


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


class PrincipalConflict(Exception):
    """A key cannot be created for this principal; `status` and `code` are the REST error's."""

    def __init__(self, code: str, detail: str, status: int = 409) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail


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

    async def create(
        self, name: str, principal_id: str, admin: bool, *, existing_principal: bool = False
    ) -> tuple[ApiKey, str]:
        """Stores a new key; returns it and its secret (the only time the secret exists).

        A principal is one identity: a new key for a principal another key already has is
        refused (PrincipalConflict) unless `existing_principal` says that is the intent, and
        even then only with that principal's admin flag. The principal row is inserted
        without ON CONFLICT (or locked, when it exists), so two keys created at once for one
        new principal cannot both pass.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            if existing_principal:
                current = await conn.fetchval(
                    "SELECT admin FROM key_principals WHERE principal_id = $1 FOR UPDATE",
                    principal_id,
                )
                if current is None:
                    raise PrincipalConflict(
                        "principal_not_found",
                        f"no key acts for principal {principal_id!r}; "
                        "create it without existing_principal",
                        status=404,
                    )
                if current != admin:
                    raise PrincipalConflict(
                        "principal_admin_mismatch",
                        f"principal {principal_id!r} is {'an' if current else 'not an'} admin; "
                        "a new key for it must be too",
                    )
            else:
                try:
                    await conn.execute(
                        "INSERT INTO key_principals (principal_id, admin) VALUES ($1, $2)",
                        principal_id,
                        admin,
                    )
                except asyncpg.UniqueViolationError:
                    raise PrincipalConflict(
                        "principal_exists",
                        f"principal {principal_id!r} already has a key; to add another for it "
                        "(rotation) say existing_principal",
                    ) from None
            return await _insert(conn, name, principal_id, admin)

    async def authenticate(self, secret: str) -> ApiKey | None:
        """The active key with this secret, or None; touches last_used_at now and then.

        Every failure of the database (lost, frozen, refusing, a connection left busy by an
        abandoned statement, even a missing table) raises DatabaseUnavailable: whether a
        key is valid is then unknown, which is a 503 for the caller, never a 500 or a 401.
        """
        if not secret.startswith(KEY_PREFIX) or len(secret) > MAX_KEY_CHARS:
            return None
        try:
            return await self._authenticate(secret)
        except DatabaseUnavailable:
            raise
        except (
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
            OSError,
            TimeoutError,
        ) as err:
            # The type is kept in the message: the caller logs it, and "another operation is
            # in progress" alone does not say it came from asyncpg.
            raise DatabaseUnavailable(
                f"the key store is unavailable: {type(err).__name__}: {err}"
            ) from err

    async def _authenticate(self, secret: str) -> ApiKey | None:
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

    async def discard(self, key_id: str) -> None:
        """Deletes a key whose secret was never handed out (its creation failed half-way),
        and its principal when no other key has it, so the name can be used again."""
        async with self._pool.acquire() as conn, conn.transaction():
            principal_id = await conn.fetchval(
                "DELETE FROM api_keys WHERE id = $1 RETURNING principal_id", uuid.UUID(key_id)
            )
            if principal_id is not None:
                await conn.execute(
                    "DELETE FROM key_principals p WHERE principal_id = $1 AND NOT EXISTS "
                    "(SELECT 1 FROM api_keys k WHERE k.principal_id = p.principal_id)",
                    principal_id,
                )

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

"""Access management: grants and visibility of repositories and collections (admin only).

These change what the ACL fragments in acl.py let through; search, graph and routing see
the change on their next query because they filter inside their own SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import asyncpg

from retrieval.acl import Viewer
from svckit.errors import InvalidArgument, NotFound, PermissionDenied

TargetKind = Literal["repository", "collection"]
_MAX_PRINCIPAL = 200


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    name: str  # repository slug or collection name


def require_admin(viewer: Viewer) -> None:
    if not viewer.admin:
        raise PermissionDenied("only an admin may change access")


def checked_target(kind: str, name: str) -> Target:
    value = name.strip()
    if kind not in ("repository", "collection") or not value:
        raise InvalidArgument("name a repository or a collection")
    if kind == "repository":
        return Target("repository", value.lower())
    return Target("collection", value)


def checked_principal(principal_id: str) -> str:
    value = principal_id.strip()
    if not value or len(value) > _MAX_PRINCIPAL:
        raise InvalidArgument(f"principal_id is required and at most {_MAX_PRINCIPAL} chars")
    return value


async def _target_id(conn: asyncpg.Connection, target: Target) -> int:
    if target.kind == "repository":
        sql = "SELECT id FROM repositories WHERE slug = $1"
    else:
        sql = "SELECT id FROM collections WHERE name = $1"
    found = await conn.fetchval(sql, target.name)
    if found is None:
        raise NotFound(f"no {target.kind} {target.name}")
    return int(found)


def _column(target: Target) -> str:
    return "repository_id" if target.kind == "repository" else "collection_id"


async def grant(conn: asyncpg.Connection, principal_id: str, target: Target) -> bool:
    """True when the grant is new."""
    target_id = await _target_id(conn, target)
    column = _column(target)
    inserted = await conn.fetchval(
        f"INSERT INTO grants (principal_id, {column}) VALUES ($1, $2) "
        f"ON CONFLICT ({column}, principal_id) WHERE {column} IS NOT NULL DO NOTHING "
        "RETURNING id",
        principal_id,
        target_id,
    )
    return inserted is not None


async def revoke(conn: asyncpg.Connection, principal_id: str, target: Target) -> bool:
    """True when a grant was removed."""
    target_id = await _target_id(conn, target)
    removed = await conn.fetchval(
        f"DELETE FROM grants WHERE principal_id = $1 AND {_column(target)} = $2 RETURNING id",
        principal_id,
        target_id,
    )
    return removed is not None


async def set_visibility(conn: asyncpg.Connection, target: Target, public: bool) -> bool:
    """True when the visibility changed."""
    target_id = await _target_id(conn, target)
    table = "repositories" if target.kind == "repository" else "collections"
    changed = await conn.fetchval(
        f"UPDATE {table} SET public = $2 WHERE id = $1 AND public <> $2 RETURNING id",
        target_id,
        public,
    )
    return changed is not None

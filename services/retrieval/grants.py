"""Access management: grants (read or write) and visibility of repositories and
collections (admin only).

These change what the access rules (cograph_api.access_rules) let through; search, graph
and routing see the change on their next query because they filter inside their own SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import asyncpg

from cograph_api.access_rules import Viewer
from svckit.errors import InvalidArgument, NotFound, PermissionDenied

TargetKind = Literal["repository", "collection"]
Role = Literal["read", "write"]
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


def checked_role(role: str) -> Role:
    if role == "read":
        return "read"
    if role == "write":
        return "write"
    raise InvalidArgument(f"role must be read or write, got {role!r}")


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


async def grant(
    conn: asyncpg.Connection, principal_id: str, target: Target, role: Role = "read"
) -> bool:
    """Sets the principal's grant on the target to `role`; true when that changed anything
    (a new grant, or a read grant raised to write or a write grant lowered to read)."""
    target_id = await _target_id(conn, target)
    column = _column(target)
    changed = await conn.fetchval(
        f"INSERT INTO grants (principal_id, {column}, role) VALUES ($1, $2, $3) "
        f"ON CONFLICT ({column}, principal_id) WHERE {column} IS NOT NULL "
        "DO UPDATE SET role = EXCLUDED.role WHERE grants.role <> EXCLUDED.role "
        "RETURNING id",
        principal_id,
        target_id,
        role,
    )
    return changed is not None


async def revoke(
    conn: asyncpg.Connection, principal_id: str, target: Target, role: Role = "read"
) -> bool:
    """Revoking `read` removes the grant; revoking `write` lowers a write grant to read.
    True when a grant changed."""
    target_id = await _target_id(conn, target)
    column = _column(target)
    if role == "write":
        sql = (
            f"UPDATE grants SET role = 'read' WHERE principal_id = $1 AND {column} = $2 "
            "AND role = 'write' RETURNING id"
        )
    else:
        sql = f"DELETE FROM grants WHERE principal_id = $1 AND {column} = $2 RETURNING id"
    changed = await conn.fetchval(sql, principal_id, target_id)
    return changed is not None


async def set_visibility(conn: asyncpg.Connection, target: Target, public: bool) -> bool:
    """True when the visibility changed."""
    target_id = await _target_id(conn, target)
    table = "repositories" if target.kind == "repository" else "collections"
    changed = await conn.fetchval(
        f"UPDATE {table} SET public = $2 WHERE id = $1 AND public <> $2 RETURNING id",
        target_id,
        public,
    )
    if target.kind == "repository":
        # A repository's indexed refs are exactly as visible as it is (access_rules).
        await conn.execute(
            "UPDATE repositories SET public = $2 WHERE parent_id = $1 AND public <> $2",
            target_id,
            public,
        )
    return changed is not None

"""Access control as SQL fragments, so every reader filters inside the query that scores.

A principal reads a repository or collection when it is an admin, the source is public,
or a grant (of either role, `read` or `write`) names it; it writes (re-indexes, changes the
source) only as an admin or through a `write` grant (Access below). Callers bind the
principal id and the admin flag as parameters and splice the fragment into their WHERE
clause, e.g.

    sql = f"SELECT ... FROM code_nodes n JOIN repositories r ON r.id = n.repository_id "
          f"WHERE {repository_readable('r', '$1', '$2')} AND ..."
    await conn.fetch(sql, viewer.principal_id, viewer.admin, ...)
"""

from __future__ import annotations

from dataclasses import dataclass

from svckit import requestctx


@dataclass(frozen=True)
class Viewer:
    """Who is reading. A request without a principal sees public sources only."""

    principal_id: str | None
    admin: bool

    @classmethod
    def current(cls) -> Viewer:
        principal = requestctx.current_principal()
        if principal is None:
            return cls(None, False)
        return cls(principal.id, principal.admin)


def repository_readable(alias: str, principal_param: str, admin_param: str) -> str:
    """Boolean SQL: the repository row `alias` is readable by the bound principal.

    A row that indexes a named ref of a repository (`parent_id` set, retrieval migration
    0016) is read under its repository's grants, and its `public` is kept equal to the
    repository's, so a ref is readable exactly when its repository is."""
    return (
        f"({admin_param}::boolean OR {alias}.public OR EXISTS ("
        f"SELECT 1 FROM grants g WHERE g.repository_id = coalesce({alias}.parent_id, {alias}.id) "
        f"AND g.principal_id = {principal_param}::text))"
    )


def collection_readable(alias: str, principal_param: str, admin_param: str) -> str:
    """Boolean SQL: the collection row `alias` is readable by the bound principal."""
    return (
        f"({admin_param}::boolean OR {alias}.public OR EXISTS ("
        f"SELECT 1 FROM grants g WHERE g.collection_id = {alias}.id "
        f"AND g.principal_id = {principal_param}::text))"
    )


@dataclass(frozen=True)
class Access:
    """What one viewer may do with one repository or collection.

    read: search, graph, describe it. write: also re-index it and change its source (a
    `write` grant). Admins may do everything, including what no grant gives: change its
    visibility and grants, delete it.
    """

    exists: bool
    readable: bool
    writable: bool

    @classmethod
    def of(cls, viewer: Viewer, *, exists: bool, public: bool, role: str | None) -> Access:
        if not exists:
            return cls(False, False, False)
        writable = viewer.admin or role == "write"
        return cls(True, writable or public or role is not None, writable)

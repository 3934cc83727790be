"""Who may change a repository or collection, and who may follow an index job.

Roles (access_rules.Access): read lets a principal search and describe a target; write also lets it
re-index the target and change its source; only admins change visibility and grants,
delete, set `public` or `grant_principal_ids` while indexing, and (unless
RETRIEVAL_CREATE_SOURCES=any) create new targets.

The refusals are worded so that they reveal nothing a caller could not read anyway: an
unknown name and a target the caller cannot read get the same error and the same message.
"""

from __future__ import annotations

from typing import Literal

from cograph_api.access_rules import Access, Viewer
from svckit.errors import NotFound, PermissionDenied

Kind = Literal["repository", "collection"]
CreatePolicy = Literal["admin", "any"]


def not_writable(kind: Kind, name: str) -> PermissionDenied:
    """The one refusal for a name that is unknown or unreadable to the caller."""
    return PermissionDenied(f"no {kind} {name} that you may write to")


def require_admin_fields(viewer: Viewer, public: bool, grant_principal_ids: object) -> None:
    if not viewer.admin and (public or grant_principal_ids):
        raise PermissionDenied(
            "only an admin may set public or grant_principal_ids; ask an admin to change "
            "visibility or grants"
        )


def authorize_index(
    access: Access, viewer: Viewer, kind: Kind, name: str, create: CreatePolicy
) -> bool:
    """Raises unless `viewer` may (re-)index the target; True when a non-admin is creating
    it (it then gets a write grant)."""
    if viewer.admin or access.writable:
        return False
    if access.readable:
        raise PermissionDenied(
            f"you may read {kind} {name} but not re-index it or change its source: that "
            "needs a write grant"
        )
    if not access.exists and create == "any" and viewer.principal_id:
        return True
    raise not_writable(kind, name)


def authorize_delete(access: Access, viewer: Viewer, kind: Kind, name: str) -> None:
    """Admins delete; anyone else learns only what they could already read."""
    if not access.readable:
        raise NotFound(f"no {kind} {name}")
    if not viewer.admin:
        raise PermissionDenied(f"only an admin may delete {kind} {name}")


def job_visible(viewer: Viewer, requested_by: set[str], target_access: Access) -> bool:
    """A job is shown to admins, to whoever asked for it, and to readers of its target."""
    if viewer.admin or target_access.readable:
        return True
    return viewer.principal_id is not None and viewer.principal_id in requested_by

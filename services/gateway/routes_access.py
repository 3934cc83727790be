"""Who may read or write what, under /api/access: grants to a principal (role `read` or
`write`) and public/private.

Retrieval decides (admin keys only) and enforces it inside every query's SQL; these routes
only carry the request there.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from cograph_api import rest_models as models
from gateway import response_models as R
from gateway.api import GatewayApi
from gateway.responses import answers


def access_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/api/access", tags=["access"])

    @router.post(
        "/grant",
        response_model=None,
        responses=answers(R.Changed, "changed", 403, 404),
    )
    async def grant(body: models.AccessGrant) -> dict[str, Any]:
        """Gives a principal `role` on a repository or collection: `read` (the default)
        lets it search and read; `write` also lets it re-index and change the source. An
        existing grant is set to that role; changed is false when it already had it."""
        return await api.grant(body)

    @router.post(
        "/revoke",
        response_model=None,
        responses=answers(R.Changed, "changed", 403, 404),
    )
    async def revoke(body: models.AccessGrant) -> dict[str, Any]:
        """Takes a grant away at once (role `read`, the default), or only its write role
        (role `write`: the grant stays, as read); changed is false when nothing changed."""
        return await api.revoke(body)

    @router.post(
        "/visibility",
        response_model=None,
        responses=answers(R.Changed, "changed", 403, 404),
    )
    async def visibility(body: models.Visibility) -> dict[str, Any]:
        """Makes a repository or collection public (every key reads it) or private again;
        changed is false when it already was."""
        return await api.set_visibility(body)

    return router

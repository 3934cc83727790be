"""Who may read what, under /api/access: grants to a principal and public/private.

Retrieval decides (admin keys only) and enforces it inside every query's SQL; these routes
only carry the request there.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway import models
from gateway.api import GatewayApi
from gateway.responses import errors


def access_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/api/access", tags=["access"])

    @router.post("/grant", responses=errors(403, 404))
    async def grant(body: models.AccessGrant) -> dict[str, Any]:
        """Lets a principal read a private repository or collection; changed is false when
        the grant already existed."""
        return await api.grant(body)

    @router.post("/revoke", responses=errors(403, 404))
    async def revoke(body: models.AccessGrant) -> dict[str, Any]:
        """Takes a grant away at once; changed is false when there was none."""
        return await api.revoke(body)

    @router.post("/visibility", responses=errors(403, 404))
    async def visibility(body: models.Visibility) -> dict[str, Any]:
        """Makes a repository or collection public (every key reads it) or private again;
        changed is false when it already was."""
        return await api.set_visibility(body)

    return router

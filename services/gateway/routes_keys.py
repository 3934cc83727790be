"""API key administration under /api/keys (admin keys only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response

from cograph_api import limits
from cograph_api import rest_models as models
from gateway import response_models as R
from gateway.api import GatewayApi
from gateway.auth import principal_of
from gateway.errors import ApiError
from gateway.keys_store import KeysStore, PrincipalConflict
from gateway.responses import answers, errors

KeyId = Annotated[str, Path(min_length=1, max_length=limits.ID_MAX_CHARS)]


async def require_admin(request: Request) -> None:
    principal = principal_of(request.scope)
    if principal is None or not principal.admin:
        raise ApiError(403, "permission_denied", "an admin API key is required")


def keys_router(keys: KeysStore, api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/api/keys", tags=["keys"], dependencies=[Depends(require_admin)])

    @router.post(
        "",
        status_code=201,
        response_model=None,
        responses=answers(
            R.NewKeyAnswer, "new_key", 403, 404, 409, status=201, description="The new key."
        ),
    )
    async def create_key(body: models.NewKey) -> dict[str, Any]:
        """Creates a key and returns its secret once (only a hash is kept). A reserved name
        or principal (admin, root, system, ...) is refused (400); so is a principal another
        key has (409 principal_exists) unless existing_principal asks for a second key for
        it, which must then have the principal's admin flag (409 principal_admin_mismatch)."""
        principal_id = body.principal
        grants = [
            *(
                models.AccessGrant(principal_id=principal_id, repository=r)
                for r in body.grant_repositories
            ),
            *(
                models.AccessGrant(principal_id=principal_id, collection=c)
                for c in body.grant_collections
            ),
        ]
        try:
            key, secret = await keys.create(
                body.name, principal_id, body.admin, existing_principal=body.existing_principal
            )
        except PrincipalConflict as err:
            raise ApiError(err.status, err.code, err.detail) from None
        if grants:
            try:
                for grant in grants:
                    await api.grant(grant)
            except ApiError:
                # A key without the access it was created for would fail confusingly later;
                # its secret was never shown, so it is removed, and its new principal with it.
                await keys.discard(key.id)
                raise
        return {**key.to_json(), "key": secret}

    @router.get("", response_model=None, responses=answers(R.KeyList, "keys", 403))
    async def list_keys() -> dict[str, Any]:
        """Every key, without secrets."""
        return {"keys": [k.to_json() for k in await keys.list()]}

    @router.delete("/{key_id}", status_code=204, responses=errors(403, 404))
    async def revoke_key(key_id: KeyId) -> Response:
        """Revokes a key at once; requests with it are then 401."""
        if await keys.revoke(key_id) is None:
            raise ApiError(404, "not_found", f"no key {key_id}")
        return Response(status_code=204)

    return router

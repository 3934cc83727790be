"""Bearer API keys -> the request's principal, for every route that is not public.

An ASGI middleware (not a FastAPI dependency) so that the MCP endpoint, which is a plain
ASGI app, is guarded by exactly the same code. The principal goes into the request-context
variables (every backend call made while handling the request carries it as gRPC
metadata) and into `scope["state"]`, where the MCP tool handlers, which run in the MCP
session manager's own tasks, read it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

import asyncpg
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError
from gateway.keys_store import KeysStore
from svckit import requestctx
from svckit.deadline import within
from svckit.errors import DomainError
from svckit.requestctx import Principal

log = logging.getLogger(__name__)

STATE_PRINCIPAL = "cograph_principal"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")


class Authenticator:
    """Turns an Authorization header into a principal, or refuses with 401."""

    def __init__(
        self, keys: KeysStore, allow_anonymous: bool, lookup_timeout_s: float = 2.5
    ) -> None:
        self._keys = keys
        self._allow_anonymous = allow_anonymous
        self._lookup_timeout_s = lookup_timeout_s

    async def principal(self, authorization: str | None) -> Principal | None:
        if authorization is None or not authorization.strip():
            if self._allow_anonymous:
                return None  # anonymous: backends show public data only, writes refuse
            raise ApiError(401, "unauthenticated", "missing API key (Authorization: Bearer ...)")
        scheme, _, secret = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise ApiError(401, "unauthenticated", "expected Authorization: Bearer <api key>")
        try:
            # A hard deadline: without it a frozen database holds every request until the
            # client gives up, long before any backend deadline could apply.
            key = await within(self._keys.authenticate(secret.strip()), self._lookup_timeout_s)
        except TimeoutError:
            log.warning("key lookup timed out", extra={"timeout_s": self._lookup_timeout_s})
            raise ApiError(
                503,
                "unavailable",
                f"the key store did not answer within {self._lookup_timeout_s:g} s",
            ) from None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, DomainError) as err:
            log.warning("key store unavailable", extra={"error": str(err)})
            raise ApiError(503, "unavailable", "the key store is unavailable") from None
        if key is None:
            raise ApiError(401, "unauthenticated", "invalid or revoked API key")
        return Principal(key.principal_id, key.admin)


def principal_of(scope: Scope) -> Principal | None:
    state = scope.get("state") or {}
    principal = state.get(STATE_PRINCIPAL)
    return principal if isinstance(principal, Principal) else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def send_error(
    send: Send, error: ApiError, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class AuthMiddleware:
    """Sets request id and principal for each HTTP request; 401 without a valid key."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator, public: PublicPaths) -> None:
        self._app = app
        self._authenticator = authenticator
        self._public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        request_id = given if given and _REQUEST_ID.match(given) else requestctx.new_request_id()
        rid_token = requestctx.set_request_id(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            path: str = scope.get("path", "")
            if self._public.matches(path):
                await self._app(scope, receive, send_with_id)
                return
            try:
                principal = await self._authenticator.principal(_header(scope, b"authorization"))
            except ApiError as err:
                extra = [(b"www-authenticate", b"Bearer")] if err.status == 401 else []
                await send_error(send_with_id, err, extra)
                return
            scope.setdefault("state", {})[STATE_PRINCIPAL] = principal
            token = requestctx.set_principal(principal)
            try:
                await self._app(scope, receive, send_with_id)
            finally:
                requestctx.reset_principal(token)
        finally:
            requestctx.reset_request_id(rid_token)


class PublicPaths:
    """Paths served without a key: probes, metrics, the API description, the console page."""

    def __init__(self, exact: Iterable[str], prefixes: Iterable[str] = ()) -> None:
        self._exact = frozenset(exact)
        self._prefixes = tuple(prefixes)

    def matches(self, path: str) -> bool:
        return path in self._exact or path.startswith(self._prefixes)

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
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import asyncpg
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cograph_api.admin_keys import MAX_KEY_CHARS, hash_key
from gateway.early_refusal import EarlyRefusal
from gateway.errors import ApiError
from gateway.keys_store import KeysStore
from svckit import requestctx
from svckit.deadline import within
from svckit.errors import DomainError
from svckit.requestctx import Principal

log = logging.getLogger(__name__)

STATE_PRINCIPAL = "cograph_principal"
STATE_KEY = "cograph_key"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")


# How long a key's principal is remembered after the key last passed the database lookup,
# and for how many keys. Used only to refuse a request over its allowance (gateway.
# early_refusal), never to admit one: a key revoked a moment ago may get 429 instead of 401
# until then, and is refused either way.
RECENT_KEYS_TTL_S = 60.0
RECENT_KEYS_MAX = 10_000


class RecentKeys:
    """Principals of the keys that authenticated lately, by the key's SHA-256 (the secret
    itself is not kept): a flood from a key over its allowance is refused with a hash and
    a dictionary lookup instead of a database round trip per request."""

    def __init__(
        self,
        ttl_s: float = RECENT_KEYS_TTL_S,
        max_keys: int = RECENT_KEYS_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max = max_keys
        self._clock = clock
        # hash -> (principal, when it authenticated), least recently authenticated first.
        self._keys: OrderedDict[bytes, tuple[Principal, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def remember(self, secret: str, principal: Principal) -> None:
        digest = hash_key(secret)
        self._keys[digest] = (principal, self._clock())
        self._keys.move_to_end(digest)
        while len(self._keys) > self._max:
            self._keys.popitem(last=False)

    def principal(self, secret: str) -> Principal | None:
        """The principal of a key that authenticated within the TTL, else None."""
        if len(secret) > MAX_KEY_CHARS:
            return None  # never a key (the lookup refuses it too); not worth hashing
        digest = hash_key(secret)
        found = self._keys.get(digest)
        if found is None:
            return None
        principal, when = found
        if self._clock() - when > self._ttl_s:
            del self._keys[digest]
            return None
        return principal


@dataclass(frozen=True)
class KeyLabel:
    """Which key a request authenticated with, for the access log: several keys may act for
    one principal (a rotation, a key per machine), so the principal alone cannot say which
    was used. Its id and the name an admin gave it; never the secret or its prefix."""

    id: str
    name: str


def key_of(scope: Scope) -> KeyLabel | None:
    state = scope.get("state") or {}
    key = state.get(STATE_KEY)
    return key if isinstance(key, KeyLabel) else None


def _bearer(authorization: str) -> str | None:
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    return secret.strip()


class Authenticator:
    """Turns an Authorization header into a principal, or refuses with 401."""

    def __init__(
        self,
        keys: KeysStore,
        allow_anonymous: bool,
        lookup_timeout_s: float = 2.5,
        recent: RecentKeys | None = None,
    ) -> None:
        self._keys = keys
        self._allow_anonymous = allow_anonymous
        self._lookup_timeout_s = lookup_timeout_s
        self._recent = recent if recent is not None else RecentKeys()

    def recent_principal(self, authorization: str | None) -> tuple[bool, Principal | None]:
        """Who this request acts for, if that is known without the database: (True, the
        principal of a key that authenticated lately, or None for an anonymous request
        where those are allowed); (False, None) when only `principal` can tell."""
        if authorization is None or not authorization.strip():
            return self._allow_anonymous, None
        secret = _bearer(authorization)
        if secret is None:
            return False, None
        principal = self._recent.principal(secret)
        return principal is not None, principal

    async def principal(self, authorization: str | None) -> Principal | None:
        principal, _ = await self.identify(authorization)
        return principal

    async def identify(self, authorization: str | None) -> tuple[Principal | None, KeyLabel | None]:
        """The principal the request acts for and the key it used; (None, None) for an
        anonymous request where those are allowed. Raises the 401 (or 503) otherwise."""
        if authorization is None or not authorization.strip():
            if self._allow_anonymous:
                return None, None  # anonymous: backends show public data only, writes refuse
            raise ApiError(401, "unauthenticated", "missing API key (Authorization: Bearer ...)")
        secret = _bearer(authorization)
        if secret is None:
            raise ApiError(401, "unauthenticated", "expected Authorization: Bearer <api key>")
        try:
            # A hard deadline: without it a frozen database holds every request until the
            # client gives up, long before any backend deadline could apply.
            key = await within(self._keys.authenticate(secret), self._lookup_timeout_s)
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
        principal = Principal(key.principal_id, key.admin)
        self._recent.remember(secret, principal)
        return principal, KeyLabel(key.id, key.name)


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
    """Sets request id and principal for each HTTP request; 401 without a valid key.

    With `early` (the per-key limits are on), a request from a key known to be over its
    allowance is refused with 429 before the key lookup and before its body is read.
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        public: PublicPaths,
        early: EarlyRefusal | None = None,
    ) -> None:
        self._app = app
        self._authenticator = authenticator
        self._public = public
        self._early = early

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
            authorization = _header(scope, b"authorization")
            if self._early is not None and await self._refused_early(
                scope, path, authorization, send_with_id
            ):
                return
            try:
                principal, key = await self._authenticator.identify(authorization)
            except ApiError as err:
                extra = [(b"www-authenticate", b"Bearer")] if err.status == 401 else []
                await send_error(send_with_id, err, extra)
                return
            state = scope.setdefault("state", {})
            state[STATE_PRINCIPAL] = principal
            state[STATE_KEY] = key
            token = requestctx.set_principal(principal)
            try:
                await self._app(scope, receive, send_with_id)
            finally:
                requestctx.reset_principal(token)
        finally:
            requestctx.reset_request_id(rid_token)

    async def _refused_early(
        self, scope: Scope, path: str, authorization: str | None, send: Send
    ) -> bool:
        assert self._early is not None
        known, principal = self._authenticator.recent_principal(authorization)
        if not known:
            return False
        refused = self._early.refusal(scope.get("method", "GET"), path, principal)
        if refused is None:
            return False
        error, work, label = refused
        scope["route"] = label  # what the metrics label the response with
        await self._early.hold(principal, work, error)
        headers = [(k.lower().encode(), v.encode()) for k, v in error.headers().items()]
        await send_error(send, error, headers)
        return True


class PublicPaths:
    """Paths served without a key: probes, metrics, the API description, the console page."""

    def __init__(self, exact: Iterable[str], prefixes: Iterable[str] = ()) -> None:
        self._exact = frozenset(exact)
        self._prefixes = tuple(prefixes)

    def matches(self, path: str) -> bool:
        return path in self._exact or path.startswith(self._prefixes)

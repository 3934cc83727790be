"""Per-request context carried across await points and across services.

The request id and the caller's principal travel in gRPC metadata, signed by the caller
(svckit.clients) and verified by the callee (svckit.interceptors); contextvars make them
visible to logging and to the SQL layer without threading them through every call.
"""

from __future__ import annotations

import contextvars
import uuid
from dataclasses import dataclass

REQUEST_ID_HEADER = "x-request-id"
PRINCIPAL_HEADER = "x-cograph-principal"
ADMIN_HEADER = "x-cograph-admin"

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "cograph_request_id", default=None
)
_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "cograph_principal", default=None
)


@dataclass(frozen=True)
class Principal:
    """Who a request acts for; `admin` reads everything."""

    id: str
    admin: bool = False


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    return _request_id.get()


def set_request_id(value: str | None) -> contextvars.Token[str | None]:
    return _request_id.set(value)


def reset_request_id(token: contextvars.Token[str | None]) -> None:
    _request_id.reset(token)


def current_principal() -> Principal | None:
    return _principal.get()


def set_principal(value: Principal | None) -> contextvars.Token[Principal | None]:
    return _principal.set(value)


def reset_principal(token: contextvars.Token[Principal | None]) -> None:
    _principal.reset(token)

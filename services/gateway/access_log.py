"""The gateway's access log: one JSON line per HTTP request, REST and MCP alike.

Each line names the method, the route *template* (`/api/repositories/{slug:path}`, never the
raw path, and never the query string, which may carry a secret a client put there), the
status, the duration, the request id the response carries, who the request acted for (the
principal, which grants and limits apply to) and with which key (its id and name: one
principal may have several keys), and on a 401 or 403 why it was refused. Nothing from the
request's headers is written, so an API key's secret never reaches the log, whether it was
valid or not.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.auth import key_of, principal_of

log = logging.getLogger("gateway.access")

UNMATCHED = "unmatched"
# Refusals whose reason the line carries; their bodies are the gateway's small error
# documents ({"error", "detail"}), read only up to this many bytes.
REFUSALS = frozenset({401, 403})
MAX_REFUSAL_BODY_BYTES = 4096
# A reason is the error's detail, cut to this length: it names what was refused (a key that
# is missing or revoked, a repository the key may not write), never the key itself.
MAX_REASON_CHARS = 200


def route_template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that served the request, else of the route its path and
    method match (a request refused before routing, such as a 401), else `unmatched`."""
    route = scope.get("route")
    if isinstance(route, str):  # a label set by a middleware that answered itself
        return route
    path = getattr(route, "path", None)
    if isinstance(path, str) and path:
        return path
    for candidate in routes:
        match, _ = candidate.matches(scope)
        if match is not Match.NONE:
            return str(getattr(candidate, "path", UNMATCHED) or UNMATCHED)
    return UNMATCHED


def refusal_reason(body: bytes) -> tuple[str, str]:
    """(error code, detail) of a refusal's body; ("", "") when it is not an error document."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "", ""
    if not isinstance(document, dict):
        return "", ""
    code = document.get("error")
    detail = document.get("detail")
    return (
        code if isinstance(code, str) else "",
        detail[:MAX_REASON_CHARS] if isinstance(detail, str) else "",
    )


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class AccessLogMiddleware:
    """Outermost middleware: times every HTTP request and writes its line once answered
    (or once the app failed, as the 500 the client saw)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self._app = app
        self._routes = routes  # full-path routes, for requests refused before routing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start = time.perf_counter()
        seen: dict[str, Any] = {"status": 500, "request_id": None}
        refusal = bytearray()

        async def logging_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = int(message["status"])
                seen["request_id"] = _header(message.get("headers", ()), b"x-request-id")
            elif message["type"] == "http.response.body" and seen["status"] in REFUSALS:
                room = MAX_REFUSAL_BODY_BYTES - len(refusal)
                if room > 0:
                    refusal.extend(bytes(message.get("body", b""))[:room])
            await send(message)

        try:
            await self._app(scope, receive, logging_send)
        finally:
            self._write(scope, seen, bytes(refusal), time.perf_counter() - start)

    def _write(self, scope: Scope, seen: dict[str, Any], refusal: bytes, seconds: float) -> None:
        status = int(seen["status"])
        entry: dict[str, Any] = {
            "method": scope.get("method", "GET"),
            "route": route_template(scope, self._routes),
            "status": status,
            "duration_ms": round(seconds * 1000, 1),
        }
        if seen["request_id"]:
            entry["request_id"] = seen["request_id"]
        principal = principal_of(scope)
        if principal is not None:
            entry["principal"] = principal.id
            entry["admin"] = principal.admin
        key = key_of(scope)
        if key is not None:
            entry["key"] = key.name
            entry["key_id"] = key.id
        client = scope.get("client")
        if client:
            entry["client"] = client[0]
        if status in REFUSALS:
            code, detail = refusal_reason(refusal)
            entry["error"] = code or ("unauthenticated" if status == 401 else "forbidden")
            entry["auth_failure"] = detail or entry["error"]
        log.info("http request", extra=entry)

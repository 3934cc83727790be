"""Refuses oversized request bodies with 413 and text that is not UTF-8 with 400.

A body that declares too large a Content-Length is refused before it is read. A chunked body
declares nothing, so it is counted as the route reads it; the route's own reading cannot be
trusted to report the overflow (the framework turns any error raised while a route reads
its body into a generic 400), so the overflow is remembered here and whatever the route
answers is replaced by the 413. JSON bodies are decoded incrementally on the way through
(JSON is UTF-8 by RFC 8259) and invalid bytes are answered with a 400 the same way.

Starlette and uvicorn decode percent-escapes in the query string and the path with
errors="replace", so `?q=%FF` would reach a route as U+FFFD and search for something the
caller never sent; both are checked before the route runs.
"""

from __future__ import annotations

import codecs
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.auth import send_error
from gateway.errors import ApiError, invalid


def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _query_error(query_string: bytes) -> str | None:
    for pair in query_string.split(b"&"):
        name, _, value = pair.partition(b"=")
        for part in (name, value):
            if _not_utf8(unquote_to_bytes(part.replace(b"+", b" "))):
                shown = name.decode("ascii", "replace")[:40]
                return f"query parameter {shown!r}: not valid UTF-8 (percent-encode UTF-8 bytes)"
    return None


def _is_json(scope: Scope) -> bool:
    for key, value in scope.get("headers", ()):
        if key == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or kind.endswith(b"+json")
    return False


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    def _too_large(self) -> ApiError:
        return ApiError(413, "payload_too_large", f"request body over {self._max} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        problem = _text_error(scope)
        if problem is not None:
            await send_error(send, invalid(problem))
            return
        declared: int | None = None
        expects_continue = False
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_error(send, invalid("bad Content-Length"))
                    return
            elif key == b"expect" and value.lower() == b"100-continue":
                expects_continue = True
        if declared is not None and declared > self._max:
            if not expects_continue and declared <= 2 * self._max:
                # Read (and drop) what is already on its way, so the client reads the 413
                # instead of a connection reset; a larger body is not worth reading.
                await _drain(receive, declared)
            await send_error(send, self._too_large())
            return
        await _Exchange(self, scope, receive, send).run()


class _Exchange:
    """One request whose body is checked as the route reads it."""

    def __init__(self, limit: BodyLimitMiddleware, scope: Scope, receive: Receive, send: Send):
        self._limit = limit
        self._scope = scope
        self._receive = receive
        self._send = send
        self._seen = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")() if _is_json(scope) else None
        self._error: ApiError | None = None  # set once the body is refused
        self._started = False  # the route's response has begun (it can no longer be replaced)
        self._replaced = False

    async def run(self) -> None:
        await self._limit._app(self._scope, self._checked_receive, self._checked_send)
        if self._error is not None and not self._started and not self._replaced:
            # The route never answered (e.g. it ignored the truncated body): answer for it.
            await send_error(self._send, self._error)

    async def _checked_receive(self) -> Message:
        if self._error is not None:
            return {"type": "http.request", "body": b"", "more_body": False}
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        chunk: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        self._seen += len(chunk)
        limit = self._limit._max
        if self._seen > limit:
            self._error = self._limit._too_large()
            if more:
                await _drain(self._receive, 2 * limit - self._seen)
            return {"type": "http.request", "body": b"", "more_body": False}
        if self._decoder is not None:
            try:
                self._decoder.decode(chunk, final=not more)
            except UnicodeDecodeError:
                self._error = invalid("body: not valid UTF-8 (JSON must be UTF-8)")
                if more:
                    await _drain(self._receive, limit - self._seen)
                return {"type": "http.request", "body": b"", "more_body": False}
        return message

    async def _checked_send(self, message: Message) -> None:
        if self._error is not None and not self._started:
            # Whatever the route made of a truncated body is replaced by the real reason.
            if not self._replaced:
                self._replaced = True
                await send_error(self._send, self._error)
            return
        if self._replaced:
            return
        if message["type"] == "http.response.start":
            self._started = True
        await self._send(message)


def _text_error(scope: Scope) -> str | None:
    query_error = _query_error(scope.get("query_string", b""))
    if query_error is not None:
        return query_error
    raw_path = scope.get("raw_path")
    if raw_path is not None and _not_utf8(unquote_to_bytes(raw_path)):
        return "path: not valid UTF-8 (percent-encode UTF-8 bytes)"
    return None


async def _drain(receive: Receive, budget: int) -> None:
    """Reads and drops up to `budget` more bytes of the body, or until it ends."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return

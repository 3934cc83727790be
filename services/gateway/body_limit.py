"""Refuses request bodies over the configured size with 413, before they are parsed."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.auth import send_error
from gateway.errors import ApiError


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
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_error(send, ApiError(400, "invalid_argument", "bad Content-Length"))
                    return
                if declared > self._max:
                    await send_error(send, self._too_large())
                    return
        seen = 0

        async def counting_receive() -> Message:
            # Chunked bodies declare no length: count as they arrive.
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._max:
                    raise self._too_large()
            return message

        await self._app(scope, counting_receive, send)

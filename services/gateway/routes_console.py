"""The /search console: static HTML, JS and CSS that call the REST API from the browser, and
the one route of its own, the file view's read with syntax highlighting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from cograph_api import rest_models as models
from gateway import highlight
from gateway.api import GatewayApi
from gateway.errors import ApiError

CONSOLE_DIR = Path(__file__).resolve().parent / "console"
_ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
# The stylesheet of the highlighter's classes (gateway.highlight), made by Pygments.
HIGHLIGHT_CSS = "highlight.css"
# The page talks only to its own origin; inline scripts and styles are not used.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def console_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    stylesheet = highlight.stylesheet()

    @router.get("/search")
    async def page() -> FileResponse:
        return FileResponse(
            CONSOLE_DIR / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS
        )

    @router.get("/search/{asset}")
    async def asset(asset: str) -> Response:
        if asset == HIGHLIGHT_CSS:
            return Response(stylesheet, media_type="text/css; charset=utf-8", headers=_HEADERS)
        media = _ASSETS.get(asset)
        if media is None:
            raise ApiError(404, "not_found", f"no console asset {asset}")
        return FileResponse(CONSOLE_DIR / asset, media_type=media, headers=_HEADERS)

    @router.post("/console/api/read")
    async def read(body: models.ReadRequest) -> dict[str, Any]:
        """POST /api/read for the caller's key (the same call, access checks, limits and
        errors), with the lines as highlighted tokens added under `highlight`. Not under
        /search/, which is public: this route needs a key like the API it stands for."""
        reply = await api.read(body)
        content = str(reply.get("content") or "")
        # Lexing up to a read's 100,000 characters takes tens of milliseconds: off the
        # event loop, so other requests go on meanwhile.
        lexer, lines = await asyncio.to_thread(
            highlight.tokens,
            content,
            str(reply.get("path") or body.path),
            reply.get("language", ""),
        )
        reply["highlight"] = {"lexer": lexer, "lines": lines}
        return reply

    return router

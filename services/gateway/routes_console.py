"""The /search console: static HTML, JS and CSS that call the REST API from the browser."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from gateway.errors import ApiError

CONSOLE_DIR = Path(__file__).resolve().parent / "console"
_ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
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


def console_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/search")
    async def page() -> FileResponse:
        return FileResponse(
            CONSOLE_DIR / "index.html", media_type="text/html; charset=utf-8", headers=_HEADERS
        )

    @router.get("/search/{asset}")
    async def asset(asset: str) -> FileResponse:
        media = _ASSETS.get(asset)
        if media is None:
            raise ApiError(404, "not_found", f"no console asset {asset}")
        return FileResponse(CONSOLE_DIR / asset, media_type=media, headers=_HEADERS)

    return router

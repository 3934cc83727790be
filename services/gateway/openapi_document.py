"""The OpenAPI document at /openapi.json, and /docs (Swagger UI) and /redoc reading it.

FastAPI's document is adjusted where it cannot see the truth:

- authentication is middleware (gateway.auth), so the Bearer scheme is added here, and
  every operation but the public health checks requires it;
- request validation errors are answered 400 `invalid_argument` with the error body
  (gateway.errors), never 422, so FastAPI's 422 `HTTPValidationError` entries are removed.

The two documentation pages load their scripts and styles from this gateway (the assets
that the fastapi-offline package ships), never from a CDN, which a self-hosted install may
not reach. They are public, as /openapi.json is: they show nothing the document does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS = "/docs"
REDOC = "/redoc"
ASSETS = "/docs/assets"
PUBLIC_OPERATIONS = frozenset({"/healthz", "/readyz"})
_ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema with the Bearer scheme and without 422 (built once, then kept)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "A Cograph API key."}
    }
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            operation["security"] = [] if path in PUBLIC_OPERATIONS else [{"bearer": []}]
            operation.get("responses", {}).pop("422", None)
    for name in _VALIDATION_SCHEMAS:
        components.get("schemas", {}).pop(name, None)
    app.openapi_schema = schema
    return schema


def install_docs(app: FastAPI) -> None:
    """Serves /openapi.json as `document` builds it, /docs, /redoc and their assets."""
    app.openapi = lambda: document(app)  # type: ignore[method-assign]
    app.mount(ASSETS, StaticFiles(directory=_ASSETS_DIR), name="docs-assets")
    router = APIRouter(include_in_schema=False)
    title = app.title
    openapi_url = app.openapi_url or "/openapi.json"

    @router.get(DOCS)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} - API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )

    @router.get(REDOC)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} - API",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)

"""Liveness, readiness and metrics: public, unauthenticated, cheap."""

from __future__ import annotations

from typing import Any

import asyncpg
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.backends import Backends
from gateway.metrics import Metrics


def health_router(backends: Backends, pool: asyncpg.Pool, metrics: Metrics) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is up (nothing else is checked)."""
        return {"status": "ok"}

    @router.get("/readyz", responses={503: {"description": "a dependency is not ready"}})
    async def readyz() -> JSONResponse:
        """Every configured backend reports SERVING and the key store answers."""
        statuses: dict[str, Any] = await backends.health()
        try:
            async with pool.acquire(timeout=backends.health_timeout_s) as conn:
                await conn.fetchval("SELECT 1", timeout=backends.health_timeout_s)
            statuses["database"] = "serving"
        except (OSError, TimeoutError, asyncpg.PostgresError):
            statuses["database"] = "unavailable"
        down = sorted(name for name, status in statuses.items() if status != "serving")
        if down:
            return JSONResponse(
                {
                    "error": "unavailable",
                    "detail": f"not ready: {', '.join(down)}",
                    "backends": statuses,
                },
                status_code=503,
            )
        return JSONResponse({"status": "ready", "backends": statuses})

    router.add_api_route("/metrics", metrics.endpoint, methods=["GET"], include_in_schema=False)
    return router

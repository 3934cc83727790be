"""Checks real gateway answers against the models the OpenAPI document declares for them.

Installed as an httpx response hook on a test's clients, it validates each successful JSON
answer (strictly: a string is no number) against its route's declared model, so every
call a test makes also checks that the document tells the truth about it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from starlette.routing import Match


def api_routes(routes: list[Any]) -> list[APIRoute]:
    """Every route of the app, through the routers included (FastAPI keeps them nested)."""
    out: list[APIRoute] = []
    for route in routes:
        router = getattr(route, "original_router", None)
        if router is not None:
            out.extend(api_routes(router.routes))
        elif isinstance(route, APIRoute):
            out.append(route)
    return out


class Contract:
    """The declared answer models of an app's routes; `checked` counts (method, route)
    pairs validated so far."""

    def __init__(self, app: FastAPI) -> None:
        self._routes = [r for r in api_routes(app.routes) if r.include_in_schema]
        self.checked: dict[tuple[str, str], int] = {}

    def model(self, method: str, path: str, status: int) -> tuple[str, Any] | None:
        scope = {"type": "http", "method": method, "path": path}
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                documented = route.responses.get(status)
                return route.path, documented.get("model") if documented else None
        return None

    async def hook(self, response: httpx.Response) -> None:
        if not 200 <= response.status_code < 300 or response.status_code == 204:
            return
        request = response.request
        found = self.model(request.method, request.url.path, response.status_code)
        if found is None:
            return  # not a documented route (/search, /mcp, the hooks)
        template, model = found
        assert model is not None, f"{request.method} {template} {response.status_code} undocumented"
        body = await response.aread()
        try:
            TypeAdapter(model).validate_json(body, strict=True)
        except ValueError as err:
            shown = json.dumps(json.loads(body))[:400]
            raise AssertionError(f"{request.method} {template}: {err}\n{shown}") from None
        key = (request.method, template)
        self.checked[key] = self.checked.get(key, 0) + 1

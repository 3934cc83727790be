"""Refuses a request over its key's allowance before its body is read or parsed.

GatewayApi takes the allowance (gateway.quotas) once the route has read and validated
the body; for a key that keeps sending past its allowance, that is work done only to
answer 429: reading the body (up to GATEWAY_MAX_BODY_BYTES), parsing the JSON, validating
a 4,000-character query, and looking the key up in the database. Here, in the auth
middleware, a request on one of the routes below from a key that authenticated lately
(gateway.auth.RecentKeys) is checked against its bucket first, and a refusal is answered
at once with the same 429 `rate_limited` and Retry-After that GatewayApi would give.
Nothing is taken here: an admitted request goes on to the database lookup and GatewayApi,
which takes the token.

The table holds the routes a flood would pick (each class of work is here); a route not
in it is still limited, only later (after its body is read).

A key that comes back before the Retry-After it was given (a client looping on 429s) has
its refusal answered after QuotaSettings.hold_s instead of at once: its connections then
bring at most one request each per hold, where they would otherwise loop as fast as the
two ends' CPUs allow (its Retry-After is the one computed when it came, so it errs long).
At most max_held_per_key refusals are held for one key and max_held in all; past those a
refusal is answered at once.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.api import GatewayApi, work_of
from gateway.quotas import Quotas, QuotaSettings, RateLimited, Work
from svckit.requestctx import Principal

_POST_ID = r"[^/]+"

# (method, path pattern, the GatewayApi method the route calls): the class of work is that
# method's @limited one, so it is defined once (tests/unit/test_gateway_early_refusal.py
# checks that each route calls the method named here).
ROUTES: tuple[tuple[str, str, Callable[..., Any]], ...] = (
    ("POST", "/api/search", GatewayApi.search),
    ("POST", "/api/graph", GatewayApi.graph),
    ("POST", "/api/references", GatewayApi.references),
    ("POST", "/api/route", GatewayApi.route),
    ("GET", "/v1/search", GatewayApi.search_posts),
    ("POST", "/api/grep", GatewayApi.grep),
    ("POST", "/api/read", GatewayApi.read),
    ("GET", "/api/files", GatewayApi.list_files),
    ("GET", "/api/outline", GatewayApi.outline),
    ("POST", "/api/repositories", GatewayApi.index_repository),
    ("POST", "/api/collections", GatewayApi.index_collection),
    ("POST", "/v1/posts", GatewayApi.create_post),
    ("POST", f"/v1/posts/{_POST_ID}/votes", GatewayApi.vote),
    ("POST", f"/v1/posts/{_POST_ID}/comments", GatewayApi.create_comment),
)


@dataclass(frozen=True)
class RouteLabel:
    """Stands in for the matched route in the ASGI scope (the router never runs for an
    early refusal), so the metrics label the 429 by its route, not as unmatched."""

    path: str


class EarlyRefusal:
    def __init__(
        self,
        quotas: Quotas,
        settings: QuotaSettings,
        routes: tuple[tuple[str, str, Callable[..., Any]], ...] = ROUTES,
    ) -> None:
        self._quotas = quotas
        self._settings = settings
        self._held: Counter[str] = Counter()  # refusals being held, by principal
        self._held_total = 0
        self._exact: dict[tuple[str, str], tuple[Work, RouteLabel]] = {}
        self._patterns: list[tuple[str, re.Pattern[str], Work, RouteLabel]] = []
        for method, path, call in routes:
            work = work_of(call)
            if work is None:
                raise ValueError(f"{method} {path}: {call.__name__} is not @limited")
            label = RouteLabel(path.replace(_POST_ID, "{post_id}"))
            if _POST_ID in path:
                self._patterns.append((method, re.compile(f"^{path}$"), work, label))
            else:
                self._exact[(method, path)] = (work, label)

    def route(self, method: str, path: str) -> tuple[Work, RouteLabel] | None:
        """The class of work of a request to this route, and its label; None if not here."""
        found = self._exact.get((method, path))
        if found is not None:
            return found
        for route_method, pattern, work, label in self._patterns:
            if route_method == method and pattern.match(path):
                return work, label
        return None

    def refusal(
        self, method: str, path: str, principal: Principal | None
    ) -> tuple[RateLimited, Work, RouteLabel] | None:
        """The 429 this principal's request to this route gets now, or None to go on."""
        found = self.route(method, path)
        if found is None:
            return None
        work, label = found
        refused = self._quotas.refusal(principal, work)
        return (refused, work, label) if refused is not None else None

    @property
    def held(self) -> int:
        """How many refusals are being held now."""
        return self._held_total

    async def hold(self, principal: Principal | None, work: Work, refused: RateLimited) -> None:
        """Waits before a refusal is answered, if the key came back early (see above)."""
        if not self._quotas.came_back_early(principal, work, refused):
            return
        name = principal.id if principal is not None else ""
        settings = self._settings
        if (
            settings.hold_s <= 0
            or self._held[name] >= settings.max_held_per_key
            or self._held_total >= settings.max_held
        ):
            return
        self._held[name] += 1
        self._held_total += 1
        try:
            await asyncio.sleep(settings.hold_s)
        finally:
            self._held_total -= 1
            self._held[name] -= 1
            if not self._held[name]:
                del self._held[name]

"""Prometheus request metrics per route template and status, served at GET /metrics on a
listener of its own (GATEWAY_METRICS_LISTEN, svckit.metrics.MetricsEndpoint) like every
service's: never on the public HTTP port, which an Ingress may publish.

The registry belongs to the app (not prometheus_client's process-global one), so several
gateways in one test process never share counters. Labels use the route *template*
(/v1/posts/{post_id}), never the raw path, so cardinality stays bounded.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"

# How far back /readyz looks for searches answered without their query vector: one in
# that window makes it report `search` degraded (issue 28: it said ready while most
# searches lost their vector to a busy embedder).
SEARCH_DEGRADED_WINDOW_S = 60.0
# The error a note search answers when its query could not be embedded in time.
SEMANTIC_SEARCH_UNAVAILABLE = b'"semantic_search_unavailable"'


class SearchHealth:
    """Searches answered without their query vector in the last `window_s`, by kind
    (`code`: no vector stream; `notes`: 503 semantic_search_unavailable). Memory is
    bounded by the searches of one window."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._events: deque[tuple[float, str]] = deque()

    def lost_vector(self, kind: str) -> None:
        self._events.append((self._clock(), kind))

    def recent(self) -> dict[str, int]:
        horizon = self._clock() - self.window_s
        while self._events and self._events[0][0] < horizon:
            self._events.popleft()
        return dict(Tally(kind for _, kind in self._events))


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "cograph_gateway_requests_total",
            "HTTP requests handled, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "cograph_gateway_request_duration_seconds",
            "HTTP request latency, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )

        self.mcp_tool_calls = Counter(
            "cograph_gateway_mcp_tool_calls_total",
            "MCP tool calls, by tool (unknown: a name no tool has) and outcome (ok, or error: "
            "the result is an error, which MCP answers with HTTP 200).",
            ("tool", "outcome"),
            registry=self.registry,
        )
        self.mcp_tool_latency = Histogram(
            "cograph_gateway_mcp_tool_duration_seconds",
            "MCP tool call latency, by tool.",
            ("tool",),
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )

        self.degraded_searches = Counter(
            "cograph_gateway_degraded_search_answers_total",
            "Search answers given without one of their streams (the embedder down or slow: "
            "no vector stream), by the stream that was unavailable.",
            ("stream",),
            registry=self.registry,
        )

        self.semantic_search_unavailable = Counter(
            "cograph_gateway_semantic_search_unavailable_total",
            "Note searches answered 503 semantic_search_unavailable (their query could not "
            "be embedded in time).",
            registry=self.registry,
        )
        self.search_health = SearchHealth(SEARCH_DEGRADED_WINDOW_S)
        recent = Gauge(
            "cograph_gateway_searches_without_vector_recent",
            f"Searches answered without their query vector in the last "
            f"{SEARCH_DEGRADED_WINDOW_S:g} s, by kind (code: no vector stream; notes: 503 "
            "semantic_search_unavailable); /readyz says `search` degraded while above 0.",
            ("kind",),
            registry=self.registry,
        )
        for kind in ("code", "notes"):
            recent.labels(kind).set_function(self._recent_count(kind))

    def _recent_count(self, kind: str) -> Callable[[], float]:
        return lambda: float(self.search_health.recent().get(kind, 0))

    def count_degraded_search(self, streams: Mapping[str, object]) -> None:
        """Counts one answer per stream its response marks unavailable."""
        for stream, state in streams.items():
            if state == "unavailable":
                self.degraded_searches.labels(stream).inc()
        if streams.get("vector") == "unavailable":
            self.search_health.lost_vector("code")

    def count_semantic_search_unavailable(self) -> None:
        self.semantic_search_unavailable.inc()
        self.search_health.lost_vector("notes")

    def observe_tool_call(self, tool: str, error: bool, seconds: float) -> None:
        """One MCP tool call (cograph_api.mcp_tools names the tool, bounded)."""
        self.mcp_tool_calls.labels(tool, "error" if error else "ok").inc()
        self.mcp_tool_latency.labels(tool).observe(seconds)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    async def exposition(self) -> bytes:
        """The registry in Prometheus' text format (svckit.metrics.Exposable)."""
        return generate_latest(self.registry)


@dataclass(frozen=True)
class _RouteLabel:
    path: str


class LabelledApp:
    """An ASGI app served by a plain Starlette Route (the MCP endpoint): Starlette records
    no route in the scope for it, so this does, and its requests are labelled with its path
    rather than `unmatched`."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self._app = app
        self._label = _RouteLabel(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self._label
        await self._app(scope, receive, send)


class MetricsMiddleware:
    """Outermost middleware: sees every response, 401s and 413s included."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # if the app dies before answering, that is what the client saw

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif (
                status == 503
                and message["type"] == "http.response.body"
                and SEMANTIC_SEARCH_UNAVAILABLE in message.get("body", b"")
            ):
                # Seen here, where every response passes (REST and MCP alike); only 503
                # bodies are looked at, and they are small error documents.
                self._metrics.count_semantic_search_unavailable()
            await send(message)

        try:
            await self._app(scope, receive, recording_send)
        finally:
            # The router writes the matched route into the shared scope.
            route = scope.get("route")
            template = getattr(route, "path", None) or UNMATCHED
            self._metrics.observe(
                scope.get("method", "GET"), template, status, time.perf_counter() - start
            )

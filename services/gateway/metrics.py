"""Prometheus request metrics per route template and status, served at /metrics.

The registry belongs to the app (not prometheus_client's process-global one), so several
gateways in one test process never share counters. Labels use the route *template*
(/v1/posts/{post_id}), never the raw path, so cardinality stays bounded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"


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

        self.degraded_searches = Counter(
            "cograph_gateway_degraded_search_answers_total",
            "Search answers given without one of their streams (the embedder down or slow: "
            "no vector stream), by the stream that was unavailable.",
            ("stream",),
            registry=self.registry,
        )

    def count_degraded_search(self, streams: Mapping[str, object]) -> None:
        """Counts one answer per stream its response marks unavailable."""
        for stream, state in streams.items():
            if state == "unavailable":
                self.degraded_searches.labels(stream).inc()

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    async def endpoint(self, _: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


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

"""Composition root of the gateway: keys store, backend channels, the FastAPI app, uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import asyncpg
import grpc
import uvicorn
from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from starlette.routing import BaseRoute, Route

from cograph_api.mcp_tools import build_mcp_server, mcp_http
from gateway.access_log import AccessLogMiddleware
from gateway.api import GatewayApi
from gateway.auth import Authenticator, AuthMiddleware, PublicPaths, principal_of
from gateway.backends import Backends
from gateway.body_limit import BodyLimitMiddleware
from gateway.early_refusal import EarlyRefusal
from gateway.errors import install_error_handlers
from gateway.keys_store import MIGRATIONS, KeysStore
from gateway.metrics import LabelledApp, Metrics, MetricsMiddleware
from gateway.openapi_document import ASSETS, DOCS, REDOC, install_docs
from gateway.quotas import Quotas
from gateway.routes_access import access_router
from gateway.routes_commons import commons_router
from gateway.routes_console import console_router
from gateway.routes_health import health_router
from gateway.routes_hooks import PREFIX as HOOKS_PREFIX
from gateway.routes_hooks import hooks_router
from gateway.routes_keys import keys_router
from gateway.routes_retrieval import retrieval_router
from gateway.settings import GatewaySettings
from svckit.db import create_pool
from svckit.internal_auth import TokenSigner
from svckit.metrics import MetricsEndpoint
from svckit.migrations import migrate
from svckit.ports import bind_exclusive

log = logging.getLogger(__name__)

PUBLIC = PublicPaths(
    exact={"/healthz", "/readyz", "/openapi.json", "/search", DOCS, REDOC},
    # The push webhooks authenticate each delivery with the vendor's signature instead of
    # a key (gateway.routes_hooks); the body limit applies to them as to every route. The
    # API's documentation pages are public as /openapi.json is (gateway.openapi_document).
    prefixes=("/search/", f"{HOOKS_PREFIX}/", f"{ASSETS}/"),
)


def build_app(
    settings: GatewaySettings,
    backends: Backends,
    pool: asyncpg.Pool,
    keys: KeysStore,
    metrics: Metrics | None = None,
) -> FastAPI:
    """The ASGI app; owns nothing it did not create (the pool and channels are passed in)."""
    metrics = metrics or Metrics()
    quotas = Quotas(settings.quotas) if settings.quotas is not None else None
    api = GatewayApi(backends, metrics, quotas)
    mcp = (
        mcp_http(build_mcp_server(api, principal_of, metrics.observe_tool_call))
        if settings.mcp_enabled
        else None
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if mcp is None:
            yield
            return
        async with mcp.manager.run():
            yield

    app = FastAPI(
        title="Cograph",
        version="0.1.0",
        description="REST API of Cograph, a context engine for coding agents.",
        docs_url=None,  # served by install_docs, without a CDN
        redoc_url=None,
        lifespan=lifespan,
    )
    install_docs(app)
    install_error_handlers(app)
    routers = [
        health_router(backends, pool, metrics),
        console_router(api),
        retrieval_router(api),
        access_router(api),
        commons_router(api),
        keys_router(keys, api),
        hooks_router(api, settings, quotas),
    ]
    for router in routers:
        app.include_router(router)
    # Every route as it matches a full path, for the access log to name the route of a
    # request refused before routing (a 401).
    templates: list[BaseRoute] = [route for router in routers for route in router.routes]
    if mcp is not None:
        templates.append(
            Route("/mcp", endpoint=LabelledApp(mcp.asgi, "/mcp"), methods=["GET", "POST", "DELETE"])
        )
        app.router.routes.append(templates[-1])
    # Added last = outermost: the access log and metrics see every response, the body limit
    # runs before authentication reads anything, and authentication runs before any route.
    app.add_middleware(
        AuthMiddleware,
        authenticator=Authenticator(keys, settings.allow_anonymous, settings.key_lookup_timeout_s),
        public=PUBLIC,
        # A key over its allowance is refused here, before the key lookup and the body.
        early=(
            EarlyRefusal(quotas, settings.quotas)
            if quotas is not None and settings.quotas is not None
            else None
        ),
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(AccessLogMiddleware, routes=templates)
    return app


def server_config(app: FastAPI, settings: GatewaySettings) -> uvicorn.Config:
    """uvicorn's configuration for the API listener."""
    host, port = settings.host_port
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # Longer than any proxy in front keeps an idle upstream connection, so that the proxy
        # always closes first: a gateway closing one the proxy is reusing at that instant
        # answers that request with the proxy's 502 (GATEWAY_KEEPALIVE_S).
        timeout_keep_alive=settings.keepalive_s,
    )


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process's composition root owns signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class GatewayApp:
    app: FastAPI
    server: uvicorn.Server
    task: asyncio.Task[None]
    backends: Backends
    pool: asyncpg.Pool
    keys: KeysStore
    port: int
    metrics: MetricsEndpoint | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_address(self) -> str:
        """`host:port` of /metrics; empty when not served (GATEWAY_METRICS_LISTEN=off)."""
        return self.metrics.address if self.metrics is not None else ""

    async def stop(self) -> None:
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if self.metrics is not None:
            await self.metrics.stop()
        await self.backends.close()
        await self.pool.close()


async def start_gateway(
    settings: GatewaySettings,
    tracer_provider: TracerProvider | None = None,
    *,
    backends: Backends | None = None,
) -> GatewayApp:
    """Migrates the keys table, dials the backends, serves HTTP; returns once listening."""
    await migrate(settings.database_url, "gateway", MIGRATIONS)
    pool = await create_pool(settings.database_url)
    keys = KeysStore(pool, settings.last_used_resolution_s)
    if backends is None:
        backends = Backends.dial_all(
            settings.backend_addrs,
            timeout_s=settings.backend_timeout_s,
            health_timeout_s=settings.health_timeout_s,
            signer=TokenSigner(settings.internal_secret),
            tracer_provider=tracer_provider,
        )
    if settings.embedder_addr and "embedder" not in backends.probes:
        # Health checks only (they need no token): /readyz reports the embedder.
        backends.probes["embedder"] = grpc.aio.insecure_channel(settings.embedder_addr)
    metrics = Metrics()
    app = build_app(settings, backends, pool, keys, metrics)
    host, port = settings.host_port
    server = _Server(server_config(app, settings))
    try:
        # Bound here, exclusively, so that a port in use stops the start with PortInUse
        # (naming the holder) rather than uvicorn's log line and SystemExit.
        sock = bind_exclusive(host, port)
    except OSError:
        await pool.close()
        await backends.close()
        raise
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await backends.close()
            await pool.close()
            task.result()
            raise RuntimeError(f"gateway could not listen on {settings.address}")
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    gateway = GatewayApp(app, server, task, backends, pool, keys, bound)
    if settings.metrics.listen is not None:
        endpoint = MetricsEndpoint(metrics, settings.metrics.listen, settings.metrics.address_file)
        try:
            await endpoint.start()
        except BaseException:
            await gateway.stop()
            raise
        gateway.metrics = endpoint
    log.info(
        "gateway serving",
        extra={
            "port": bound,
            "backends": sorted(settings.backend_addrs),
            "metrics": gateway.metrics_address,
        },
    )
    return gateway

"""Composition root of the router service."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
import grpc
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import Counter

from cograph.router.v1 import router_pb2, router_pb2_grpc
from router.cache import CachedRouterStore
from router.routing import Router
from router.servicer import RouterServicer
from router.settings import RouterSettings
from router.store import RouterStore
from svckit.db import DbTimeouts, create_pool
from svckit.internal_auth import TokenVerifier
from svckit.metrics import ServiceMetrics
from svckit.server import GrpcHost

log = logging.getLogger(__name__)

SERVICE_NAME = router_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name
# The router's postings over retrieval's corpus; applied after retrieval's migrations by
# whoever migrates (cograph up, a deploy job), never by the router, whose role is read-only.
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class SchemaMissing(RuntimeError):
    """The database lacks the tables the router reads; migrations have not been applied."""


async def check_schema(pool: asyncpg.Pool) -> None:
    missing = await pool.fetchval(
        "SELECT array_agg(name) FROM unnest($1::text[]) AS name WHERE to_regclass(name) IS NULL",
        [
            "repositories",
            "repository_terms",
            "router_tokens",
            "router_collection_lexemes",
            "router_versions",
        ],
    )
    if missing:
        raise SchemaMissing(
            f"missing tables {', '.join(missing)}: apply the retrieval, then the router "
            "migrations (cograph up does this)"
        )


async def open_pool(settings: RouterSettings) -> asyncpg.Pool:
    """A pool whose every transaction is read-only: the router cannot write, whatever role.

    min_size 2: both pools are queried at once, so a warm pair avoids a connect per route.
    """
    # svckit's pool for its connect and acquire deadlines; the statement budget stays the
    # router's own (ROUTER_STATEMENT_TIMEOUT_MS), which is tighter than the default.
    timeouts = replace(DbTimeouts.from_env(), statement_s=settings.statement_timeout_ms / 1000)
    return await create_pool(
        settings.database_url,
        min_size=2,
        max_size=settings.pool_max,
        timeouts=timeouts,
        server_settings={
            "default_transaction_read_only": "on",
            "application_name": "cograph-router",
        },
        vector=False,
    )


@dataclass
class RouterApp:
    host: GrpcHost
    pool: asyncpg.Pool
    router: Router

    @property
    def port(self) -> int:
        return self.host.port

    async def stop(self) -> None:
        await self.host.stop()
        await self.pool.close()


async def start_router(
    settings: RouterSettings, tracer_provider: TracerProvider | None = None
) -> RouterApp:
    """Opens the read-only pool, then serves; health turns SERVING once both are up."""
    pool = await open_pool(settings)
    try:
        await check_schema(pool)
    except BaseException:
        await pool.close()
        raise
    metrics = ServiceMetrics()
    metrics.pools.watch(pool, "requests")
    cache_lookups = Counter(
        "cograph_router_cache_lookups_total",
        "Routes per pool (repositories, collections) answered from the kept state (hit) or "
        "read from the database (miss); none while ROUTER_CACHE_TERMS is 0.",
        ("pool", "result"),
        registry=metrics.registry,
    )

    def looked_up(name: str, hit: bool) -> None:
        cache_lookups.labels(name, "hit" if hit else "miss").inc()

    store = (
        RouterStore(pool)
        if settings.cache is None
        else CachedRouterStore(pool, settings.cache, looked_up)
    )
    router = Router(store, settings.limits)
    servicer = RouterServicer(router)

    def register(server: grpc.aio.Server) -> None:
        router_pb2_grpc.add_RouterServiceServicer_to_server(servicer, server)

    host = GrpcHost(
        [SERVICE_NAME],
        [register],
        settings.address,
        tracer_provider,
        verifier=TokenVerifier(settings.internal_secret),
        metrics=metrics,
        metrics_settings=settings.metrics,
    )
    try:
        await host.start()
    except BaseException:
        await pool.close()
        raise
    await host.set_serving()
    log.info("router serving", extra={"port": host.port, "metrics": host.metrics_address})
    return RouterApp(host, pool, router)

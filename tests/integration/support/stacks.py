"""The gateway test stack: a fresh database, the real commons, retrieval and router services
on 127.0.0.1:0 (with the session's real embedder), and the gateway on a real uvicorn socket;
and waiting on it (jobs, searchable posts, metrics)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import router as router_package
from cograph_api.admin_keys import ensure_admin_key
from commons.app import CommonsApp, start_commons
from gateway.app import GatewayApp, start_gateway
from gateway.keys_store import MIGRATIONS, KeysStore
from gateway.settings import GatewaySettings
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from router.app import RouterApp, start_router
from router.settings import RouterSettings
from svckit.config import Env
from svckit.migrations import migrate
from tests.integration.support.commons import commons_settings
from tests.integration.support.databases import fresh_database
from tests.integration.support.faults import free_port
from tests.internal_auth import with_secret


def gateway_settings(database_url: str, addrs: dict[str, str], **overrides: str) -> GatewaySettings:
    environ = {
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "COGRAPH_DATABASE_URL": database_url,
        # Tests of other behaviour send many requests in a row from one key (every hostile
        # input, every route); the per-key limits are tested on their own, with
        # GATEWAY_QUOTAS=true, in test_gateway_quotas.py.
        "GATEWAY_QUOTAS": "false",
        **{f"{name.upper()}_ADDR": addr for name, addr in addrs.items()},
        **overrides,
    }
    return GatewaySettings.from_env(Env(with_secret(environ)))


@dataclass
class Stack:
    gateway: GatewayApp
    database_url: str
    data_dir: Path
    admin_key: str
    commons: CommonsApp | None = None
    retrieval: RetrievalApp | None = None
    router: RouterApp | None = None
    _keys: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.gateway.url

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60.0, **kwargs)

    async def scrape(self) -> str:
        """The gateway's /metrics, from its own listener (GATEWAY_METRICS_LISTEN)."""
        address = self.gateway.metrics_address
        assert address, "the gateway serves no metrics (GATEWAY_METRICS_LISTEN=off)"
        async with httpx.AsyncClient(timeout=30.0) as client:
            reply = await client.get(f"http://{address}/metrics")
        assert reply.status_code == 200, reply.text
        return reply.text

    async def key(self, principal: str, *, admin: bool = False) -> str:
        """A key for `principal`, made once per stack (straight in the keys table)."""
        if principal not in self._keys:
            store = KeysStore(self.gateway.pool)
            _, secret = await store.create(principal, principal, admin)
            self._keys[principal] = secret
        return self._keys[principal]


@contextlib.asynccontextmanager
async def gateway_stack(
    pg_server_url: str,
    embedder_address: str,
    data_dir: Path,
    *,
    commons_embedder: str | None = None,
    services: tuple[str, ...] = ("commons", "retrieval", "router"),
    service_env: dict[str, str] | None = None,
    **overrides: str,
) -> AsyncIterator[Stack]:
    """Starts the services named in `services` and the gateway in front of them;
    `service_env` is added to retrieval's and the commons' environment, `overrides` to
    the gateway's."""
    extra = service_env or {}
    async with (
        fresh_database(pg_server_url, prefix="gw") as url,
        contextlib.AsyncExitStack() as stack,
    ):
        addrs: dict[str, str] = {}
        commons = retrieval = router = None
        # Retrieval asks the commons for the notes beside code and the commons asks
        # retrieval about anchors: the commons' port is chosen first so both know it.
        commons_listen = "127.0.0.1:0"
        notes_env: dict[str, str] = {}
        if "commons" in services and "retrieval" in services:
            commons_listen = f"127.0.0.1:{free_port()}"
            notes_env = {"COMMONS_ADDR": commons_listen}
        if "retrieval" in services:
            retrieval = await start_retrieval(
                RetrievalSettings.from_env(
                    Env(
                        with_secret(
                            {
                                "COGRAPH_DATABASE_URL": url,
                                "COGRAPH_DATA_DIR": str(data_dir / "retrieval"),
                                "RETRIEVAL_LISTEN": "127.0.0.1:0",
                                "EMBEDDER_ADDR": embedder_address,
                                # Freshness looks at the source's head on every call.
                                "RETRIEVAL_HEAD_CACHE_S": "0",
                                **notes_env,
                                **extra,
                            }
                        )
                    )
                )
            )
            stack.push_async_callback(retrieval.stop)
            addrs["retrieval"] = f"127.0.0.1:{retrieval.port}"
        if "router" in services:
            # The router never migrates itself (its role is read-only): whoever deploys does.
            router_migrations = Path(router_package.__file__).parent / "migrations"
            if any(router_migrations.glob("*.sql")):
                await migrate(url, "router", router_migrations)
            router = await start_router(
                RouterSettings.from_env(
                    Env(with_secret({"ROUTER_LISTEN": "127.0.0.1:0", "ROUTER_DATABASE_URL": url}))
                )
            )
            stack.push_async_callback(router.stop)
            addrs["router"] = f"127.0.0.1:{router.port}"
        if "commons" in services:
            # The commons resolves and re-checks notes' anchors through retrieval.
            peers = {"RETRIEVAL_ADDR": addrs["retrieval"]} if "retrieval" in addrs else {}
            commons = await start_commons(
                commons_settings(
                    url,
                    commons_embedder or embedder_address,
                    COMMONS_LISTEN=commons_listen,
                    **peers,
                    **extra,
                )
            )
            stack.push_async_callback(commons.stop)
            addrs["commons"] = f"127.0.0.1:{commons.port}"
        admin_key = await ensure_admin_key(url, data_dir, MIGRATIONS)
        assert admin_key is not None
        gateway = await start_gateway(gateway_settings(url, addrs, **overrides))
        stack.push_async_callback(gateway.stop)
        yield Stack(gateway, url, data_dir, admin_key, commons, retrieval, router)


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(every_s)


async def wait_job(
    client: httpx.AsyncClient, job_id: str, timeout_s: float = 120.0
) -> dict[str, Any]:
    """Polls GET /api/jobs/{id} until the job finishes; returns the final job."""
    last: dict[str, Any] = {}

    async def finished() -> bool:
        nonlocal last
        reply = await client.get(f"/api/jobs/{job_id}")
        assert reply.status_code == 200, reply.text
        last = reply.json()
        return last["state"] in ("succeeded", "failed")

    await wait_until(finished, timeout_s, f"job {job_id}", every_s=0.3)
    return last


async def wait_searchable(client: httpx.AsyncClient, post_id: str, timeout_s: float = 60.0) -> None:
    async def searchable() -> bool:
        reply = await client.get(f"/v1/posts/{post_id}")
        return bool(reply.status_code == 200 and reply.json()["searchable"])

    await wait_until(searchable, timeout_s, f"post {post_id} searchable")


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith((name + "{", name + " ")):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            return float(value)
    return 0.0

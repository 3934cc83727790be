"""Liveness, readiness and metrics: public, unauthenticated, cheap.

`/readyz` reports every dependency and one of three states:

- `ready` (200): the database and every configured backend answer, and so does the
  embedder when EMBEDDER_ADDR is set;
- `degraded` (200): all of those but the embedder. The gateway still serves: code search
  answers from its lexical and symbol streams (its response marks the vector stream
  `unavailable`), while note search and indexing fail until the embedder is back. It stays
  in rotation, since no other replica would do better;
- `not_ready` (503): the database or a backend does not answer; the body also carries the
  usual `error` and `detail`.

`search` appears, as `vector_stream_unavailable`, when a search was answered without its
query vector in the last 60 s (gateway.metrics.SEARCH_DEGRADED_WINDOW_S): a code search
without its vector stream or a note search answered 503 semantic_search_unavailable, as
when the embedder is too busy to embed queries in time. `degraded`, still 200: the
gateway serves, with worse answers; the detail says how many of each.

`embedding_space` appears, as `embedding_model_mismatch`, when retrieval or the commons
found that the embedder serves another model than the one their stored vectors come from
(or a re-embed is running): `degraded`, with `embedding_model_mismatch` naming those
backends. Vector search is off there until `cograph reembed` has run (README, "Changing
the embedding model").

Each dependency's value is `serving`, or what its check found (`not_serving`,
`unavailable`, `deadline_exceeded`, ...). Every check runs concurrently under
GATEWAY_HEALTH_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gateway.backends import Backends
from gateway.metrics import Metrics, SearchHealth
from gateway.response_examples import EXAMPLES
from gateway.response_models import Health, Readiness
from svckit.deadline import within
from svckit.errors import DomainError

# Dependencies whose loss degrades answers instead of stopping them.
OPTIONAL = frozenset({"embedder", "embedding_space", "search"})
SEARCH_DEGRADED = "vector_stream_unavailable"


async def _database_status(pool: asyncpg.Pool, timeout_s: float) -> str:
    async def ping() -> None:
        async with pool.acquire(timeout=timeout_s) as conn:
            await conn.fetchval("SELECT 1", timeout=timeout_s)

    try:
        await within(ping(), timeout_s)
    except TimeoutError:
        return "deadline_exceeded"
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, DomainError):
        return "unavailable"
    return "serving"


def space_status(verdicts: dict[str, str]) -> dict[str, str]:
    """The `embedding_space` dependency from each vector-holding backend's verdict: listed
    only while one of them reports a mismatch (a matching space adds nothing, so the body
    of a ready gateway is what it was before the check existed)."""
    bad = [verdict for verdict in verdicts.values() if verdict != "serving"]
    return {"embedding_space": bad[0]} if bad else {}


def search_status(health: SearchHealth) -> tuple[dict[str, str], str]:
    """The `search` pseudo-dependency (listed only while searches lost their query vector
    recently) and the words /readyz's detail gives it."""
    recent = health.recent()
    if not recent:
        return {}, ""
    window = f"{health.window_s:g} s"
    what = (
        f"search: in the last {window}, {recent.get('code', 0)} code searches without "
        f"their vector stream, {recent.get('notes', 0)} note searches 503 "
        "semantic_search_unavailable"
    )
    return {"search": SEARCH_DEGRADED}, what


def _down_detail(name: str, status: str, search_detail: str = "") -> str:
    if name == "embedding_space":
        return f"embedding_space {status} (run `cograph reembed`)"
    if name == "search" and search_detail:
        return search_detail
    return f"{name} unavailable"


def readiness(
    statuses: dict[str, str],
    space: dict[str, str] | None = None,
    search: SearchHealth | None = None,
) -> tuple[int, dict[str, Any]]:
    """The status code and body /readyz answers for these dependency statuses; `space` is
    each vector-holding backend's embedding-space verdict (Backends.space_health),
    `search` the recent searches that lost their query vector."""
    space = space or {}
    searched, search_detail = search_status(search) if search is not None else ({}, "")
    statuses = {**statuses, **space_status(space), **searched}
    mismatched = sorted(name for name, verdict in space.items() if verdict != "serving")
    down = sorted(name for name, status in statuses.items() if status != "serving")
    required = [name for name in down if name not in OPTIONAL]
    if required:
        return 503, {
            "status": "not_ready",
            "error": "unavailable",
            "detail": f"not ready: {', '.join(required)}",
            "dependencies": statuses,
        }
    if down:
        body: dict[str, Any] = {
            "status": "degraded",
            "detail": "degraded: "
            + ", ".join(_down_detail(n, statuses[n], search_detail) for n in down),
            "degraded": down,
            "dependencies": statuses,
        }
        if mismatched:
            body["embedding_model_mismatch"] = mismatched
        return 200, body
    return 200, {"status": "ready", "dependencies": statuses}


def health_router(backends: Backends, pool: asyncpg.Pool, metrics: Metrics) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get(
        "/healthz",
        response_model=None,
        responses={
            200: {"model": Health, "content": {"application/json": {"example": EXAMPLES["health"]}}}
        },
    )
    async def healthz() -> dict[str, str]:
        """The process is up (nothing else is checked)."""
        return {"status": "ok"}

    @router.get(
        "/readyz",
        response_model=None,
        responses={
            200: {
                "model": Readiness,
                "description": "ready or degraded.",
                "content": {"application/json": {"example": EXAMPLES["ready"]}},
            },
            503: {
                "model": Readiness,
                "description": "not_ready: a required dependency is down.",
                "content": {"application/json": {"example": EXAMPLES["not_ready"]}},
            },
        },
    )
    async def readyz() -> JSONResponse:
        """Each dependency's health, and `ready`, `degraded` (200) or `not_ready` (503)."""
        served, probed, database, space = await asyncio.gather(
            backends.health(),
            backends.probe_health(),
            _database_status(pool, backends.health_timeout_s),
            backends.space_health(),
        )
        status, body = readiness(
            {**served, "database": database, **probed}, space, metrics.search_health
        )
        return JSONResponse(body, status_code=status)

    return router

"""Router configuration, read once at start-up.

The router only reads. Its pool opens every transaction read-only, so even a role that may
write cannot be made to; production should still give it, via ROUTER_DATABASE_URL, a role
with SELECT only on repositories, collections, grants, repository_terms, collection_terms and
the router's own derived tables (router_tokens, router_repository_postings,
router_collection_postings, router_collection_lexemes, router_versions). The router's
migrations are applied by whoever migrates (cograph up, a deploy job) with a role that may
create triggers on retrieval's tables; never by the router itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cograph_api import limits
from router.cache import CacheLimits
from router.routing import RouteLimits
from svckit.config import Env, internal_secret
from svckit.metrics import MetricsSettings

MAX_RESULTS = limits.ROUTE_RESULTS_MAX  # per pool; part of the published contract


@dataclass(frozen=True)
class RouterSettings:
    address: str
    database_url: str
    pool_max: int
    statement_timeout_ms: int  # a runaway route query is cancelled by the server
    limits: RouteLimits
    cache: CacheLimits | None  # None: every route derives N and df in SQL (RouterStore)
    ready_file: Path | None
    log_level: str
    # Signs and verifies calls between services (svckit.internal_auth); never logged.
    internal_secret: bytes = field(repr=False)
    # Where /metrics is served (svckit.metrics); the default serves nothing.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)

    @classmethod
    def from_env(cls, env: Env) -> RouterSettings:
        ready = env.optional_str("ROUTER_READY_FILE")
        shared_url = env.optional_str("COGRAPH_DATABASE_URL")
        return cls(
            address=env.str("ROUTER_LISTEN", "127.0.0.1:50053"),
            database_url=env.str("ROUTER_DATABASE_URL", shared_url),
            pool_max=env.int("ROUTER_DB_POOL_MAX", 10, min=2, max=200),
            statement_timeout_ms=env.int("ROUTER_STATEMENT_TIMEOUT_MS", 5000, min=10, max=600_000),
            limits=RouteLimits(
                default_repositories=env.int(
                    "ROUTER_DEFAULT_REPOSITORIES",
                    limits.ROUTE_RESULTS_DEFAULT,
                    min=limits.ROUTE_RESULTS_MIN,
                    max=MAX_RESULTS,
                ),
                default_collections=env.int(
                    "ROUTER_DEFAULT_COLLECTIONS",
                    limits.ROUTE_RESULTS_DEFAULT,
                    min=limits.ROUTE_RESULTS_MIN,
                    max=MAX_RESULTS,
                ),
                max_results=MAX_RESULTS,
                # Not a setting: the gateway publishes this limit (cograph_api.limits).
                max_query_chars=limits.ROUTE_QUERY_MAX_CHARS,
                max_query_terms=env.int("ROUTER_MAX_QUERY_TERMS", 32, min=1, max=256),
                weak_threshold=env.float("ROUTER_WEAK_THRESHOLD", 0.2, min=0.0, max=1.0),
            ),
            cache=_cache_limits(env),
            ready_file=Path(ready) if ready else None,
            log_level=env.str("COGRAPH_LOG_LEVEL", "INFO"),
            internal_secret=internal_secret(env),
            metrics=MetricsSettings.from_env(env, "router"),
        )


def _cache_limits(env: Env) -> CacheLimits | None:
    """Per pool: terms kept (about 2 bytes per source each) and viewers (1 byte per source)."""
    terms = env.int("ROUTER_CACHE_TERMS", 1024, min=0, max=1_000_000)
    viewers = env.int("ROUTER_CACHE_VIEWERS", 256, min=1, max=1_000_000)
    return CacheLimits(terms, viewers) if terms > 0 else None

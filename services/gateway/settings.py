"""Gateway configuration, read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cograph_api.limits import REQUEST_BODY_MAX_BYTES
from gateway.quotas import Allowance, QuotaSettings, Work
from svckit.config import Env, internal_secret, optional_secret
from svckit.metrics import MetricsSettings

# The gRPC services the gateway fronts, by env prefix. A backend whose <NAME>_ADDR is unset
# is "not deployed": its routes answer 503 and /readyz does not wait for it, so a checkout
# that has no router yet still comes up (cograph up sets ADDR only for services it runs).
BACKEND_NAMES: tuple[str, ...] = ("retrieval", "router", "commons")

# How long an idle client connection stays open, by default: above ingress-nginx's
# upstream-keepalive-timeout (60 s), the longest the Ingress in deploy/k8s keeps one to the
# gateway, so that the proxy, not the gateway, closes it (uvicorn's own 5 s gives the proxy
# an occasional 502 when it reuses a connection the gateway is closing).
KEEPALIVE_DEFAULT_S = 75
KEEPALIVE_MAX_S = 3600

# A push webhook's secret, at least (as the internal secret): a shorter one could be guessed
# offline from one delivery's signature.
WEBHOOK_SECRET_MIN_BYTES = 32

# Per principal and class of work (gateway.quotas): requests a second sustained, the burst
# after a pause, and how many at once. An agent waits for a model between calls, so it
# makes a call every few seconds, a few at once at most; each default leaves it room for
# more, while one key's flood is held to a share of a two-core machine that leaves other
# keys' searches within about 2x (bench/abuse.py, bench/RESULTS.md "Abuse").
DEFAULT_ALLOWANCES: dict[Work, Allowance] = {
    # A search costs ~100 ms of CPU (a 4,000-character one ~200 ms: embedding 256 tokens,
    # the lexical streams): a search every 2 s and ten in a row cover an agent fanning out
    # over a task's first questions; two at once, its parallel tool calls.
    Work.SEARCH: Allowance(rate_per_s=0.5, burst=10, concurrent=2),
    # Reads are index lookups of a few ms: an agent reading a file's pages or a listing in
    # a loop needs many a second; four at once for parallel tool calls.
    Work.READ: Allowance(rate_per_s=10.0, burst=60, concurrent=4),
    # A grep may scan every indexed line of a repository: as often as a search, one at once.
    Work.GREP: Allowance(rate_per_s=0.5, burst=10, concurrent=1),
    # Indexing runs in the background and is joined, not repeated: one every 10 s.
    Work.INDEX: Allowance(rate_per_s=0.1, burst=10, concurrent=2),
    # Push webhook deliveries, per vendor (they carry no key; gateway.routes_hooks): a push
    # a second and thirty in a row cover a busy organisation; four bodies read at once
    # bound what deliveries that fail their signature cost (each is read, up to
    # GATEWAY_MAX_BODY_BYTES, and hashed before it can be refused).
    Work.HOOKS: Allowance(rate_per_s=1.0, burst=30, concurrent=4),
    # A note is embedded by commons and read by every agent: a few per task, not a stream
    # (a flood of notes holds the embedder the searches need); 5 in a row, then one a 20 s.
    Work.NOTES: Allowance(rate_per_s=0.05, burst=5, concurrent=1),
}


def quota_settings(env: Env) -> QuotaSettings | None:
    """The per-key limits, or None when GATEWAY_QUOTAS is off (every request admitted)."""
    if not env.bool("GATEWAY_QUOTAS", True):
        return None
    allowances: dict[Work, Allowance] = {}
    for work, default in DEFAULT_ALLOWANCES.items():
        prefix = f"GATEWAY_QUOTA_{work.name}"
        allowances[work] = Allowance(
            rate_per_s=env.float(f"{prefix}_RATE", default.rate_per_s, min=0.001, max=100_000.0),
            burst=env.int(f"{prefix}_BURST", default.burst, min=1, max=1_000_000),
            concurrent=env.int(f"{prefix}_CONCURRENT", default.concurrent, min=1, max=10_000),
        )
    return QuotaSettings(
        allowances,
        limit_admins=env.bool("GATEWAY_QUOTA_ADMINS", True),
        max_buckets=env.int("GATEWAY_QUOTA_MAX_BUCKETS", 100_000, min=100, max=10_000_000),
        hold_s=env.float("GATEWAY_QUOTA_HOLD_S", 1.0, min=0.0, max=60.0),
        max_held_per_key=env.int("GATEWAY_QUOTA_MAX_HELD_PER_KEY", 32, min=1, max=100_000),
        max_held=env.int("GATEWAY_QUOTA_MAX_HELD", 1024, min=1, max=1_000_000),
    )


@dataclass(frozen=True)
class GatewaySettings:
    address: str  # host:port for uvicorn; port 0 picks a free one
    ready_file: Path | None
    database_url: str  # the API keys live here
    backend_addrs: dict[str, str]  # name -> host:port, only the configured ones
    backend_timeout_s: float  # deadline of every backend call
    health_timeout_s: float  # deadline of each readiness probe
    allow_anonymous: bool  # requests without a key act as no principal (public data only)
    max_body_bytes: int  # larger request bodies are refused with 413 before parsing
    last_used_resolution_s: float  # how stale a key's last_used_at may get before a write
    mcp_enabled: bool
    log_level: str
    # Signs and verifies calls between services (svckit.internal_auth); never logged.
    internal_secret: bytes = field(repr=False)
    # An API key's lookup; past it the request is refused with 503 (the key store is
    # the database, and a frozen one must not hold every request until the backend deadline).
    key_lookup_timeout_s: float = 2.5
    # Probed by /readyz only: without the embedder search answers without its vector stream
    # (degraded), so the gateway reports it but does not stop being ready for it.
    embedder_addr: str | None = None
    # Per-key rate and concurrency limits (gateway.quotas); None admits every request.
    quotas: QuotaSettings | None = None
    # The push webhooks' secrets (gateway.routes_hooks); None: that hook answers 404.
    github_webhook_secret: bytes | None = field(default=None, repr=False)
    gitlab_webhook_secret: bytes | None = field(default=None, repr=False)
    # Where /metrics is served (svckit.metrics): a listener of its own, never the API port.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    # Seconds an idle client connection is kept open (uvicorn's timeout_keep_alive).
    keepalive_s: int = KEEPALIVE_DEFAULT_S

    @classmethod
    def from_env(cls, env: Env) -> GatewaySettings:
        ready = env.optional_str("GATEWAY_READY_FILE")
        addrs: dict[str, str] = {}
        for name in BACKEND_NAMES:
            value = env.optional_str(f"{name.upper()}_ADDR")
            if value:
                addrs[name] = value
        return cls(
            address=env.str("GATEWAY_LISTEN", "127.0.0.1:8080"),
            ready_file=Path(ready) if ready else None,
            database_url=env.str("COGRAPH_DATABASE_URL"),
            backend_addrs=addrs,
            backend_timeout_s=env.float("GATEWAY_BACKEND_TIMEOUT_S", 30.0, min=0.1, max=600.0),
            health_timeout_s=env.float("GATEWAY_HEALTH_TIMEOUT_S", 2.0, min=0.05, max=60.0),
            allow_anonymous=env.bool("GATEWAY_ALLOW_ANONYMOUS", False),
            max_body_bytes=env.int(
                "GATEWAY_MAX_BODY_BYTES", REQUEST_BODY_MAX_BYTES, min=1024, max=1024 * 1024 * 1024
            ),
            last_used_resolution_s=env.float(
                "GATEWAY_KEY_LAST_USED_RESOLUTION_S", 60.0, min=0.0, max=86_400.0
            ),
            mcp_enabled=env.bool("GATEWAY_MCP_ENABLED", True),
            log_level=env.str("COGRAPH_LOG_LEVEL", "INFO"),
            internal_secret=internal_secret(env),
            key_lookup_timeout_s=env.float("GATEWAY_KEY_LOOKUP_TIMEOUT_S", 2.5, min=0.05, max=60.0),
            embedder_addr=env.optional_str("EMBEDDER_ADDR"),
            quotas=quota_settings(env),
            github_webhook_secret=optional_secret(
                env,
                "GATEWAY_GITHUB_WEBHOOK_SECRET",
                "GATEWAY_GITHUB_WEBHOOK_SECRET_FILE",
                min_bytes=WEBHOOK_SECRET_MIN_BYTES,
                what="the GitHub webhook secret",
            ),
            gitlab_webhook_secret=optional_secret(
                env,
                "GATEWAY_GITLAB_WEBHOOK_SECRET",
                "GATEWAY_GITLAB_WEBHOOK_SECRET_FILE",
                min_bytes=WEBHOOK_SECRET_MIN_BYTES,
                what="the GitLab webhook secret token",
            ),
            metrics=MetricsSettings.from_env(env, "gateway"),
            keepalive_s=env.int(
                "GATEWAY_KEEPALIVE_S", KEEPALIVE_DEFAULT_S, min=1, max=KEEPALIVE_MAX_S
            ),
        )

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)

"""Commons configuration, read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cograph_api import limits
from commons.ranking import RankingWeights
from commons.validation import Limits
from svckit.config import (
    BreakerSettings,
    Env,
    embedder_breaker,
    internal_secret,
    query_embed_timeout_s,
)
from svckit.disk import DiskSettings
from svckit.metrics import MetricsSettings
from svckit.replicas import ReplicaSettings


@dataclass(frozen=True)
class CommonsSettings:
    address: str
    database_url: str
    embedder_addr: str
    embedder_timeout_s: float  # query embedding; past it, search is UNAVAILABLE
    # While open, a search fails at once instead of waiting embedder_timeout_s.
    embedder_breaker: BreakerSettings
    embed_write_timeout_s: float  # note embedding (detached task and backfill)
    search_limit: int
    body_snippet: int
    weights: RankingWeights
    two_stage_threshold: int  # embedded notes at or above which two-stage retrieval is used
    two_stage_k: int  # first-stage candidates taken through the HNSW index
    note_count_ttl_s: float  # how long the note-count estimate is trusted
    filter_first_max: int  # two-stage regime: phrases this selective are scored exactly
    backfill_interval_s: float
    backfill_batch: int
    limits: Limits
    db_pool_max: int
    ready_file: Path | None
    log_level: str
    # Signs and verifies calls between services (svckit.internal_auth); never logged.
    internal_secret: bytes = field(repr=False)
    # How often the embedder's model is compared with the stored vectors' (embedding_space).
    embedding_space_check_s: float = 10.0
    # Free space kept on the data directory's disk (svckit.disk); None watches nothing.
    disk: DiskSettings | None = None
    # Where /metrics is served (svckit.metrics); the default serves nothing.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    # Retrieval, which resolves and re-checks notes' anchors (commons.anchors).
    retrieval_addr: str = "127.0.0.1:50052"
    retrieval_timeout_s: float = 5.0  # each anchor call's deadline
    anchor_check_interval_s: float = 30.0  # between staleness checks; also a pass's budget
    anchor_check_batch: int = 200  # anchors sent to retrieval per call
    # Searches and reads on streaming replicas (COGRAPH_DATABASE_READ_URL; svckit.replicas).
    replicas: ReplicaSettings = field(default_factory=ReplicaSettings)

    @classmethod
    def from_env(cls, env: Env) -> CommonsSettings:
        ready = env.optional_str("COMMONS_READY_FILE")
        return cls(
            address=env.str("COMMONS_LISTEN", "127.0.0.1:50054"),
            database_url=env.str("COGRAPH_DATABASE_URL"),
            replicas=ReplicaSettings.from_env(
                env, pool_size=env.int("COMMONS_DB_POOL_MAX", 10, min=2, max=200)
            ),
            embedder_addr=env.str("EMBEDDER_ADDR", "127.0.0.1:50051"),
            embedder_timeout_s=query_embed_timeout_s(env),
            embedder_breaker=embedder_breaker(env),
            embed_write_timeout_s=env.float(
                "COMMONS_EMBED_WRITE_TIMEOUT_S", 30.0, min=0.1, max=600.0
            ),
            search_limit=env.int("SEARCH_LIMIT", 10, min=1, max=100),
            body_snippet=env.int("SEARCH_BODY_SNIPPET", 1200, min=1, max=1_000_000),
            weights=RankingWeights(
                semantic=env.float("SEARCH_W_SEMANTIC", 1.0, min=0.0, max=100.0),
                votes=env.float("SEARCH_W_VOTES", 0.15, min=0.0, max=100.0),
                changed_anchors=env.float("SEARCH_W_CHANGED_ANCHORS", 0.1, min=0.0, max=100.0),
            ),
            two_stage_threshold=env.int(
                "COMMONS_TWO_STAGE_THRESHOLD", 200_000, min=0, max=1_000_000_000
            ),
            two_stage_k=env.int("COMMONS_TWO_STAGE_K", 400, min=10, max=1000),
            note_count_ttl_s=env.float("COMMONS_NOTE_COUNT_TTL_S", 60.0, min=0.0, max=86_400.0),
            filter_first_max=env.int("COMMONS_FILTER_FIRST_MAX", 20_000, min=0, max=10_000_000),
            backfill_interval_s=env.float(
                "COMMONS_BACKFILL_INTERVAL_S", 15.0, min=0.05, max=86_400.0
            ),
            backfill_batch=env.int("COMMONS_BACKFILL_BATCH", 32, min=1, max=256),
            # Request limits are the published contract (cograph_api.limits), not settings.
            limits=Limits(),
            db_pool_max=env.int("COMMONS_DB_POOL_MAX", 10, min=2, max=200),
            ready_file=Path(ready) if ready else None,
            log_level=env.str("COGRAPH_LOG_LEVEL", "INFO"),
            internal_secret=internal_secret(env),
            metrics=MetricsSettings.from_env(env, "commons"),
            embedding_space_check_s=env.float(
                "EMBEDDING_SPACE_CHECK_S", 10.0, min=0.05, max=3600.0
            ),
            disk=DiskSettings.from_env(env),
            retrieval_addr=env.str("RETRIEVAL_ADDR", "127.0.0.1:50052"),
            retrieval_timeout_s=env.float("COMMONS_RETRIEVAL_TIMEOUT_S", 5.0, min=0.1, max=120.0),
            anchor_check_interval_s=env.float(
                "COMMONS_ANCHOR_CHECK_INTERVAL_S", 30.0, min=0.05, max=86_400.0
            ),
            anchor_check_batch=env.int(
                "COMMONS_ANCHOR_CHECK_BATCH", 200, min=1, max=limits.ANCHORS_RECHECK_MAX
            ),
        )

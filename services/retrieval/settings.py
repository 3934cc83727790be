"""Retrieval configuration, read once at start-up."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cograph_api.git_credentials import credentials_directory
from retrieval.indexing.prepare import CODE_EMBED_TEXTS, DEFAULT_CODE_EMBED_TEXT
from retrieval.indexing.source_policy import (
    PRIVATE_SOURCES_POLICIES,
    HostPattern,
    parse_host_pattern,
)
from retrieval.search.search_settings import SearchSettings
from svckit.config import (
    BreakerSettings,
    ConfigError,
    Env,
    data_dir,
    embedder_breaker,
    http_url,
    internal_secret,
    query_embed_timeout_s,
)
from svckit.disk import DiskSettings
from svckit.metrics import MetricsSettings
from svckit.replicas import ReplicaSettings


@dataclass(frozen=True)
class SummarizerSettings:
    provider: str  # extractive | openai
    base_url: str | None
    model: str
    api_key: str | None
    timeout_s: float
    concurrency: int

    @classmethod
    def from_env(cls, env: Env) -> SummarizerSettings:
        provider = env.choice("SUMMARIZER_PROVIDER", "extractive", ("extractive", "openai"))
        base_url = env.optional_str("SUMMARIZER_BASE_URL")
        if provider == "openai" and not base_url:
            base_url = "https://api.openai.com/v1"
        if base_url:
            base_url = http_url("SUMMARIZER_BASE_URL", base_url)
        return cls(
            provider=provider,
            base_url=base_url,
            model=env.str("SUMMARIZER_MODEL", "gpt-4o-mini"),
            api_key=env.optional_str("SUMMARIZER_API_KEY"),
            timeout_s=env.float("SUMMARIZER_TIMEOUT_S", 60.0, min=0.1),
            concurrency=env.int("SUMMARIZER_CONCURRENCY", 4, min=1, max=256),
        )


def _directories(env: Env, name: str) -> tuple[Path, ...]:
    """A list of absolute directories separated by ':' (like PATH); empty when unset."""
    raw = env.optional_str(name) or ""
    paths = tuple(Path(part).expanduser() for part in raw.split(os.pathsep) if part.strip())
    relative = [str(p) for p in paths if not p.is_absolute()]
    if relative:
        raise ConfigError(f"{name}: directories must be absolute, got {', '.join(relative)}")
    return paths


def _host_patterns(env: Env, name: str) -> tuple[HostPattern, ...]:
    """Host patterns separated by commas or spaces; empty when unset."""
    raw = env.optional_str(name) or ""
    patterns = []
    for part in raw.replace(",", " ").split():
        try:
            patterns.append(parse_host_pattern(part))
        except ValueError as err:
            raise ConfigError(f"{name}: {err}") from None
    return tuple(patterns)


@dataclass(frozen=True)
class IndexSettings:
    """Knobs of an index run; the defaults keep a 2-core laptop's embedder busy."""

    max_file_bytes: int  # larger files are skipped as too_large
    embed_batch: int  # texts per Embed call (the embedder allows 256)
    embed_concurrency: int  # Embed calls in flight, so the embedder never waits on us
    embed_timeout_s: float  # per batch; indexing batches are larger than query calls
    embed_max_chars: int  # the model reads ~256 tokens; longer text only costs transfer
    parse_workers: int  # threads parsing, blaming and hashing files
    write_group: int  # files written per transaction
    max_concurrent_jobs: int  # index jobs running at once (one per target at most)
    # Who may index a path on the server (or a file:// URL): "admin" keys only (the
    # default: an agent's key could otherwise index and read back any directory the service
    # can see), or "any" key on a single-user laptop.
    local_sources: str = "admin"
    # Directories an admin's local sources must lie under; empty: anywhere but the data
    # directory.
    local_roots: tuple[Path, ...] = ()
    # Who may create a repository or collection that does not exist yet: "admin", or "any"
    # key (which then gets a write grant on it; a taken name is revealed by the refusal).
    create_sources: str = "admin"
    # Hosts remote sources may name, whoever names them (source_policy.HostPattern);
    # empty: any host the private-source rule allows.
    source_hosts: tuple[HostPattern, ...] = ()
    # Who may name a remote source whose host is, or resolves to, an address that is not
    # public (loopback, private, link-local, ...): "admin" keys (who may index server
    # paths anyway), "any" key, or "none". Checked on the request and at the job's start.
    private_sources: str = "admin"
    # Deadline of a clone or fetch; a source that stops answering fails its job at this.
    git_timeout_s: float = 300.0
    # Where the operator's git credentials are (cograph_api.git_credentials); None: none.
    credentials_dir: Path | None = None
    # What a code node's vector is computed from (prepare.CODE_EMBED_TEXTS). Files already
    # indexed keep their vectors until they change; re-index from scratch to apply it.
    code_embed_text: str = DEFAULT_CODE_EMBED_TEXT
    # Whether code tsvectors split identifiers (ParseConfig -> parse, config); search reads
    # the same variable so queries are cut the way the index was.
    # Durable jobs (indexing/jobs.py): a claimed job's lease, renewed by a heartbeat; a job
    # whose lease ran out is claimed again, at most job_max_attempts times; idle workers
    # look for queued jobs every job_poll_s (at once for jobs submitted to this process).
    job_lease_s: float = 30.0
    job_heartbeat_s: float = 5.0
    job_max_attempts: int = 3
    job_poll_s: float = 1.0
    # How long indexing waits for an embedder that is loading or down before the job fails.
    embedder_wait_s: float = 120.0
    # How long a run stays paused on a nearly full disk (svckit.disk) before it fails.
    disk_wait_s: float = 3600.0

    @property
    def protected_dirs(self) -> tuple[Path, ...]:
        """Directories no local source may be, lie in or contain, besides the data
        directory: the git credentials."""
        return (self.credentials_dir,) if self.credentials_dir is not None else ()

    @classmethod
    def from_env(cls, env: Env) -> IndexSettings:
        lease = env.float("RETRIEVAL_JOB_LEASE_S", 30.0, min=1.0, max=3600.0)
        heartbeat = env.float("RETRIEVAL_JOB_HEARTBEAT_S", 5.0, min=0.1, max=600.0)
        if heartbeat * 2 > lease:
            raise ConfigError(
                f"RETRIEVAL_JOB_HEARTBEAT_S ({heartbeat}) must be at most half of "
                f"RETRIEVAL_JOB_LEASE_S ({lease}): a lease must survive a missed heartbeat"
            )
        return cls(
            max_file_bytes=env.int("RETRIEVAL_MAX_FILE_BYTES", 1_000_000, min=1),
            embed_batch=env.int("RETRIEVAL_EMBED_BATCH", 64, min=1, max=256),
            embed_concurrency=env.int("RETRIEVAL_EMBED_CONCURRENCY", 3, min=1, max=64),
            embed_timeout_s=env.float("RETRIEVAL_INDEX_EMBED_TIMEOUT_S", 120.0, min=0.1),
            embed_max_chars=env.int("RETRIEVAL_EMBED_MAX_CHARS", 2000, min=64, max=16384),
            parse_workers=env.int("RETRIEVAL_PARSE_WORKERS", 2, min=1, max=64),
            write_group=env.int("RETRIEVAL_WRITE_GROUP", 16, min=1, max=1000),
            max_concurrent_jobs=env.int("RETRIEVAL_MAX_CONCURRENT_JOBS", 2, min=1, max=16),
            local_sources=env.choice("RETRIEVAL_LOCAL_SOURCES", "admin", ("admin", "any")),
            local_roots=_directories(env, "RETRIEVAL_LOCAL_ROOTS"),
            create_sources=env.choice("RETRIEVAL_CREATE_SOURCES", "admin", ("admin", "any")),
            source_hosts=_host_patterns(env, "RETRIEVAL_SOURCE_HOSTS"),
            private_sources=env.choice(
                "RETRIEVAL_PRIVATE_SOURCES", "admin", PRIVATE_SOURCES_POLICIES
            ),
            git_timeout_s=env.float("RETRIEVAL_GIT_TIMEOUT_S", 300.0, min=1.0, max=3600.0),
            credentials_dir=credentials_directory(env),
            code_embed_text=env.choice(
                "RETRIEVAL_CODE_EMBED_TEXT", DEFAULT_CODE_EMBED_TEXT, tuple(CODE_EMBED_TEXTS)
            ),
            job_lease_s=lease,
            job_heartbeat_s=heartbeat,
            job_max_attempts=env.int("RETRIEVAL_JOB_MAX_ATTEMPTS", 3, min=1, max=100),
            job_poll_s=env.float("RETRIEVAL_JOB_POLL_S", 1.0, min=0.05, max=60.0),
            embedder_wait_s=env.float("RETRIEVAL_EMBEDDER_WAIT_S", 120.0, min=0.0, max=3600.0),
            disk_wait_s=env.float("RETRIEVAL_DISK_WAIT_S", 3600.0, min=0.0, max=86_400.0),
        )


# The shortest sync interval but 0 (off): shorter would poll the database for little gain.
MIN_SYNC_INTERVAL_S = 0.1


@dataclass(frozen=True)
class SyncSettings:
    """Keeping indexes fresh without anyone asking (indexing/sync.py)."""

    # How often each indexed repository and directory collection is compared with its
    # source; 0 turns sync off.
    interval_s: float = 300.0
    # Checks (head lookups, directory listings) in flight at once, per replica.
    concurrency: int = 4
    # The longest wait between checks of a source that keeps failing (never below the
    # interval).
    backoff_max_s: float = 3600.0

    @property
    def enabled(self) -> bool:
        return self.interval_s > 0

    @classmethod
    def from_env(cls, env: Env) -> SyncSettings:
        interval = env.float("RETRIEVAL_SYNC_INTERVAL_S", 300.0, min=0.0, max=604_800.0)
        if 0 < interval < MIN_SYNC_INTERVAL_S:
            raise ConfigError(
                f"RETRIEVAL_SYNC_INTERVAL_S: must be 0 (off) or at least "
                f"{MIN_SYNC_INTERVAL_S:g}, got {interval:g}"
            )
        return cls(
            interval_s=interval,
            concurrency=env.int("RETRIEVAL_SYNC_CONCURRENCY", 4, min=1, max=64),
            backoff_max_s=env.float("RETRIEVAL_SYNC_BACKOFF_MAX_S", 3600.0, min=1.0, max=604_800.0),
        )


@dataclass(frozen=True)
class RetrievalSettings:
    address: str
    ready_file: Path | None
    database_url: str
    data_dir: Path
    embedder_addr: str
    embedder_timeout_s: float  # query-time embedding deadline
    # While open, searches skip the vector stream at once instead of waiting the deadline.
    embedder_breaker: BreakerSettings
    index: IndexSettings
    summarizer: SummarizerSettings
    log_level: str
    # Signs and verifies calls between services (svckit.internal_auth); never logged.
    internal_secret: bytes = field(repr=False)
    search: SearchSettings
    head_check_timeout_s: float  # looking up a source's current head (freshness)
    head_cache_s: float  # how long a looked-up head is trusted
    # How often the embedder's model is compared with the stored vectors' (embedding_space).
    embedding_space_check_s: float = 10.0
    # Free space kept on the data directory's disk (svckit.disk); None watches nothing.
    disk: DiskSettings | None = None
    # Re-indexing what moved at its source (indexing/sync.py).
    sync: SyncSettings = field(default_factory=SyncSettings)
    # Where /metrics is served (svckit.metrics); the default serves nothing.
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    # Read-only requests on streaming replicas (COGRAPH_DATABASE_READ_URL; svckit.replicas).
    replicas: ReplicaSettings = field(default_factory=ReplicaSettings)
    # The commons, asked for the notes anchored to the code an answer returns
    # (search/code_notes.py); None: no notes beside code.
    commons_addr: str | None = None
    # How long an answer waits for its notes before it goes without them.
    notes_timeout_s: float = 0.3

    @classmethod
    def from_env(cls, env: Env) -> RetrievalSettings:
        ready = env.optional_str("RETRIEVAL_READY_FILE")
        return cls(
            address=env.str("RETRIEVAL_LISTEN", "127.0.0.1:50052"),
            ready_file=Path(ready) if ready else None,
            database_url=env.str("COGRAPH_DATABASE_URL"),
            data_dir=data_dir(env),
            embedder_addr=env.str("EMBEDDER_ADDR", "127.0.0.1:50051"),
            embedder_timeout_s=query_embed_timeout_s(env),
            embedder_breaker=embedder_breaker(env),
            index=IndexSettings.from_env(env),
            summarizer=SummarizerSettings.from_env(env),
            log_level=env.str("COGRAPH_LOG_LEVEL", "INFO"),
            internal_secret=internal_secret(env),
            metrics=MetricsSettings.from_env(env, "retrieval"),
            search=(search := SearchSettings.from_env(env)),
            replicas=ReplicaSettings.from_env(env, pool_size=search.pool_size),
            head_check_timeout_s=env.float(
                "RETRIEVAL_HEAD_CHECK_TIMEOUT_S", 5.0, min=0.1, max=120.0
            ),
            head_cache_s=env.float("RETRIEVAL_HEAD_CACHE_S", 30.0, min=0.0, max=86_400.0),
            embedding_space_check_s=env.float(
                "EMBEDDING_SPACE_CHECK_S", 10.0, min=0.05, max=3600.0
            ),
            disk=DiskSettings.from_env(env),
            sync=SyncSettings.from_env(env),
            commons_addr=env.optional_str("COMMONS_ADDR"),
            notes_timeout_s=env.float("RETRIEVAL_NOTES_TIMEOUT_S", 0.3, min=0.01, max=10.0),
        )

"""Sync: indexes follow their sources without anyone asking.

Every RETRIEVAL_SYNC_INTERVAL_S each indexed repository, and each collection indexed from a
server directory, is compared with its source; when the source moved, an ordinary index job
is queued (jobs.JobManager.submit), which re-indexes incrementally by content hash. 0 turns
sync off.

- A git source: the head of the indexed branch (`git ls-remote` through freshness.HeadProbe:
  the guarded git runner, the host policy, the source's credential) against the indexed
  commit.
- A plain directory (a collection's directory, a repository of source_kind `dir`) has no
  head: a fingerprint of its listing (the paths indexing would read, with their sizes,
  mtimes and types; nothing is read) against the one the previous check saw. Queuing a run
  on every check would also be correct, as the run skips unchanged files, but it would
  still read and hash every file each interval and fill the job list with empty runs; a
  listing is one `stat` per file. The first check of a directory has nothing to compare
  with and queues one run (cheap when nothing changed).

Scheduling is kept in the database (migration 0011), so that it survives restarts and is
shared by replicas: `sync_due_at` is when the next check is due (NULL: one interval after
the last index). Each replica looks for due targets every min(interval, MAX_POLL_S) and
claims at most RETRIEVAL_SYNC_CONCURRENCY of them with `FOR UPDATE SKIP LOCKED`, moving
their due time past a lease (CLAIM_LEASE_S) in the same statement: another replica skips a
claimed target, and one whose replica died is checked again once the lease runs out. The
check then sets the real next due time (`Schedule`): the interval, cut by up to JITTER at
random so that targets indexed together drift apart, or after a failure the interval
doubled per failure in a row, at most RETRIEVAL_SYNC_BACKOFF_MAX_S. A check fails when the
source cannot be read (a removed directory, an unreachable host, a refused host) or when
the re-index the previous check queued failed (queued again, later each time).

The jobs are the service's own, as in upgrades.py: requested by SYNC_REQUESTER, an admin,
since an operator or a permitted key indexed the source already; the host policy and the
local-source policy still apply, at the check and when the job runs. A remote source's host
is checked with the authority of a key that is not an admin, at the head lookup and in the
run (`public_hosts_only`): a key with a write grant may have set that source, and a name it
controls that resolves to an internal address by the time the sync runs must be refused as
it would be for that key. A repository an admin indexed from an internal host is therefore
not synced (its checks fail and back off); index it again by hand. A target being
indexed (a job queued or running) is not checked: the running job may predate the move,
so the next check looks again. `last_checked_at` records each check; `last_synced_at` is
written when a run the sync queued has published (`recording_syncs`), or one a push
webhook queued (push_sync.py: the same jobs, at once instead of at the next check).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cograph_api.access_rules import Viewer
from cograph_api.push_hooks import WEBHOOK_PRINCIPAL
from retrieval.indexing.freshness import Freshness, HeadProbe, IndexedSource
from retrieval.indexing.indexer import (
    CollectionRequest,
    own_repository_request,
    request_to_json,
)
from retrieval.indexing.jobs import Job, JobManager, JobRunner
from retrieval.indexing.redaction import strip_secrets
from retrieval.indexing.source_policy import LocalPolicy, parse_source
from retrieval.indexing.sources import walk_directory
from svckit.errors import InvalidArgument

log = logging.getLogger(__name__)

# Who queues the sync's jobs, as job listings show it.
SYNC_REQUESTER = Viewer("cograph-sync", True)
# Runs these asked for are the sync's (last_synced_at): its own and the push webhooks'.
_SYNCING_PRINCIPALS = frozenset({SYNC_REQUESTER.principal_id or "", WEBHOOK_PRINCIPAL})
# Each wait is cut by up to this share at random (0.2: 80-100 % of it). Below 1/2, a
# doubled wait stays longer than the one before, so backoff still spreads checks out.
JITTER = 0.2
# The longest a replica waits before looking for due targets again, in seconds.
MAX_POLL_S = 5.0
# How long a claimed target is skipped by other replicas while its check runs, at least;
# the check sets the next due time when it ends, so this only matters when a replica dies.
CLAIM_LEASE_S = 60.0
# Failures past this count no more (2**62 times any interval is past every cap anyway).
_MAX_DOUBLINGS = 62


@dataclass(frozen=True)
class Schedule:
    """When the next check of a target is due; pure, for the unit tests."""

    interval_s: float
    backoff_max_s: float
    jitter: float = JITTER

    @property
    def cap_s(self) -> float:
        # A cap below the interval would check failing sources more often than good ones.
        return max(self.backoff_max_s, self.interval_s)

    def delay(self, failures: int, draw: float) -> float:
        """Seconds from a check to the next, after `failures` failed checks in a row;
        `draw` is uniform in [0, 1) and cuts the wait by up to `jitter` of it."""
        base = min(self.cap_s, self.interval_s * 2.0 ** min(max(failures, 0), _MAX_DOUBLINGS))
        return base * (1.0 - self.jitter * draw)

    @property
    def poll_s(self) -> float:
        return min(self.interval_s, MAX_POLL_S)


@dataclass(frozen=True)
class Verdict:
    """What a check that read its source does: queue a run or not, and the failures in a
    row to schedule the next check with."""

    queue: bool
    failures: int


def verdict(failures: int, *, moved: bool, previous_run_failed: bool) -> Verdict:
    """A source that moved is re-indexed. A run the previous check queued that failed is a
    failure of the target (so a source whose runs keep failing is retried less and less
    often) and is queued again, since the index still lacks what moved; otherwise the
    target is healthy again."""
    if previous_run_failed:
        return Verdict(True, failures + 1)
    return Verdict(moved, 0)


@dataclass(frozen=True)
class Target:
    """A repository or directory collection due for a check, as claimed."""

    kind: str  # repository | collection
    id: int
    name: str  # slug or collection name
    source: str
    source_kind: str  # git | url | dir (collections: dir)
    branch: str
    commit: str
    description: str
    failures: int
    fingerprint: str
    job_id: str | None

    @property
    def has_head(self) -> bool:
        return self.kind == "repository" and self.source_kind != "dir"


class SourceUnreadable(Exception):
    """The check could not compare the target with its source; the message says why."""


_TABLES = {"repository": "repositories", "collection": "collections"}

# $1: the interval (a never-checked target is due that long after its last index),
# $2: how many, $3: the claim's lease.
_CLAIM = {
    "repository": """
WITH due AS (
    SELECT id FROM repositories
    WHERE indexed_at IS NOT NULL
      AND COALESCE(sync_due_at, indexed_at + make_interval(secs => $1)) <= now()
    ORDER BY COALESCE(sync_due_at, indexed_at + make_interval(secs => $1)), id
    FOR UPDATE SKIP LOCKED
    LIMIT $2
)
UPDATE repositories r SET sync_due_at = now() + make_interval(secs => $3)
FROM due WHERE r.id = due.id
RETURNING r.id, r.slug AS name, r.source, r.source_kind, r.branch, r.commit_sha,
    '' AS description, r.sync_failures, r.sync_fingerprint, r.sync_job_id
""",
    "collection": """
WITH due AS (
    SELECT id FROM collections
    WHERE indexed_at IS NOT NULL AND source <> ''
      AND COALESCE(sync_due_at, indexed_at + make_interval(secs => $1)) <= now()
    ORDER BY COALESCE(sync_due_at, indexed_at + make_interval(secs => $1)), id
    FOR UPDATE SKIP LOCKED
    LIMIT $2
)
UPDATE collections c SET sync_due_at = now() + make_interval(secs => $3)
FROM due WHERE c.id = due.id
RETURNING c.id, c.name, c.source, 'dir' AS source_kind, '' AS branch, '' AS commit_sha,
    c.description, c.sync_failures, c.sync_fingerprint, c.sync_job_id
""",
}


async def claim_due(
    pool: asyncpg.Pool, kind: str, limit: int, interval_s: float, lease_s: float
) -> list[Target]:
    """Claims up to `limit` targets of `kind` whose check is due (see the module docstring)."""
    if limit <= 0:
        return []
    rows = await pool.fetch(_CLAIM[kind], interval_s, limit, max(lease_s, interval_s))
    return [
        Target(
            kind,
            row["id"],
            row["name"],
            row["source"],
            row["source_kind"],
            row["branch"],
            row["commit_sha"],
            row["description"],
            row["sync_failures"],
            row["sync_fingerprint"],
            row["sync_job_id"],
        )
        for row in rows
    ]


def directory_fingerprint(root: Path) -> str:
    """A digest of what indexing would list under `root` (walk_directory: .gitignore
    honoured, vendored trees and .git left out), with each entry's size, mtime and type;
    no file is read. A file that vanishes between the walk and its stat counts as gone."""
    digest = hashlib.sha256()
    for path in walk_directory(root, Counter()):
        try:
            info = os.lstat(root / path)
        except FileNotFoundError:
            continue
        kind = stat.S_IFMT(info.st_mode)
        digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0{kind}\n".encode())
    return digest.hexdigest()


def recording_syncs(pool: asyncpg.Pool, runner: JobRunner) -> JobRunner:
    """`runner`, which also notes `last_synced_at` when a run the sync, or a push webhook
    (push_sync.py), asked for succeeds."""

    async def run(job: Job) -> None:
        await runner(job)
        if not job.requested_by & _SYNCING_PRINCIPALS:
            return
        key = "slug" if job.kind == "repository" else "name"
        try:
            await pool.execute(
                f"UPDATE {_TABLES[job.kind]} SET last_synced_at = now() WHERE {key} = $1",
                job.target,
            )
        except Exception as err:  # the run itself succeeded: it must not fail or run again
            log.warning(
                "could not note the sync's run", extra={"target": job.target, "error": str(err)}
            )

    return run


class Syncer:
    """The sync loop of one replica (see the module docstring)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        jobs: JobManager,
        heads: HeadProbe,
        local: LocalPolicy,
        schedule: Schedule,
        *,
        concurrency: int,
        check_timeout_s: float,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self._pool = pool
        self._jobs = jobs
        # Its own probe, with no memory: each check looks at the source as it is now.
        self._heads = heads
        # Directories are checked again right before they are listed, as index runs do.
        self._local = local
        self._schedule = schedule
        self._concurrency = concurrency
        self._check_timeout_s = check_timeout_s
        self._draw = draw
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="retrieval-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                checked = await self.run_once()
            except Exception as err:  # the database is away, the pool busy: try again later
                log.warning("sync could not claim targets", extra={"error": str(err)})
                checked = 0
            if checked < self._concurrency:
                await asyncio.sleep(self._schedule.poll_s)

    async def run_once(self) -> int:
        """Claims and checks up to `concurrency` due targets; returns how many."""
        s = self._schedule
        targets = await claim_due(
            self._pool, "repository", self._concurrency, s.interval_s, CLAIM_LEASE_S
        )
        targets += await claim_due(
            self._pool,
            "collection",
            self._concurrency - len(targets),
            s.interval_s,
            CLAIM_LEASE_S,
        )
        await asyncio.gather(*(self._check_logged(t) for t in targets))
        return len(targets)

    async def _check_logged(self, target: Target) -> None:
        try:
            await self.check(target)
        except asyncio.CancelledError:
            raise
        except Exception:  # one target's trouble must not stop the loop; its lease expires
            log.exception("sync check failed", extra={"kind": target.kind, "target": target.name})

    async def check(self, target: Target) -> None:
        """Compares one claimed target with its source, queues a run when it moved, and
        schedules the next check."""
        failures = target.failures
        previous_failed = False
        if target.job_id is not None:
            job = await self._jobs.get(target.job_id)
            previous_failed = job is not None and job.state == "failed"
        if await self._jobs.active_job(target.kind, target.name) is not None:
            # Being indexed: no verdict now; the run in progress may predate a move.
            await self._record(target, failures, target.fingerprint, target.job_id)
            return
        try:
            moved, fingerprint = await self._compare(target)
        except SourceUnreadable as err:
            log.warning(
                "sync: the source cannot be read; checking again later",
                extra={
                    "kind": target.kind,
                    "target": target.name,
                    "failures": failures + 1,
                    "error": str(err),
                },
            )
            await self._record(target, failures + 1, target.fingerprint, None)
            return
        decided = verdict(failures, moved=moved, previous_run_failed=previous_failed)
        job_id = None
        if decided.queue:
            job = await self._jobs.submit(
                target.kind, target.name, self._request(target), SYNC_REQUESTER
            )
            job_id = job.id
            log.info(
                "sync: the source moved; re-indexing",
                extra={
                    "kind": target.kind,
                    "target": target.name,
                    "job": job.id,
                    "retry": previous_failed,
                },
            )
        await self._record(target, decided.failures, fingerprint, job_id)

    async def _compare(self, target: Target) -> tuple[bool, str]:
        """(whether the source moved since it was indexed, the directory fingerprint or
        '' for a git source)."""
        if target.has_head:
            head = await self._heads.check(
                IndexedSource(target.source, target.source_kind, target.branch, target.commit)
            )
            if head.freshness is Freshness.UNKNOWN:
                raise SourceUnreadable(head.detail)
            return head.freshness is Freshness.STALE, ""
        try:
            source = parse_source(strip_secrets(target.source))
            if source.path is None:
                raise SourceUnreadable(f"{target.source!r} is not a directory on the server")
            root = await asyncio.to_thread(
                self._local.check_directory, source.path, admin=True, what="directory"
            )
            fingerprint = await asyncio.wait_for(
                asyncio.to_thread(directory_fingerprint, root), self._check_timeout_s
            )
        except InvalidArgument as err:
            raise SourceUnreadable(err.message) from None
        except TimeoutError:
            raise SourceUnreadable(
                f"listing the directory took more than {self._check_timeout_s:g}s"
            ) from None
        except OSError as err:
            raise SourceUnreadable(f"cannot list the directory: {err}") from None
        return fingerprint != target.fingerprint, fingerprint

    @staticmethod
    def _request(target: Target) -> dict[str, object]:
        if target.kind == "repository":
            return request_to_json(
                own_repository_request(target.source, target.name, target.branch)
            )
        return request_to_json(
            CollectionRequest(
                name=target.name, description=target.description, directory=target.source
            )
        )

    async def _record(
        self, target: Target, failures: int, fingerprint: str, job_id: str | None
    ) -> None:
        delay = self._schedule.delay(failures, self._draw())
        await self._pool.execute(
            f"""
            UPDATE {_TABLES[target.kind]} SET sync_due_at = now() + make_interval(secs => $2),
                last_checked_at = now(), sync_failures = $3, sync_fingerprint = $4,
                sync_job_id = $5
            WHERE id = $1
            """,
            target.id,
            delay,
            failures,
            fingerprint,
            job_id,
        )

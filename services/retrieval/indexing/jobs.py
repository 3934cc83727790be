"""Indexing runs as background jobs with progress counters; GetJob reads them.

Jobs live in memory while this process runs them and are mirrored to `index_jobs` (at
start, every couple of seconds, and at the end) so GetJob still answers after a restart or
on another replica. A second request for a target whose job is still queued or running
joins that job instead of starting a competing one, so jobs on one target never overlap;
up to `max_concurrent` jobs on different targets run at once, so a slow source (bounded
by its git deadline) holds one slot and never the whole queue. Each job remembers who
asked for it (`requested_by`): they may follow it before its target exists.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

_FLUSH_EVERY_S = 2.0
# A running job's row is refreshed every _FLUSH_EVERY_S; much older means nobody runs it.
_STALE_AFTER_S = 60.0


@dataclass
class Progress:
    phase: str = "queued"
    files_seen: int = 0
    files_total: int = 0
    files_done: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    nodes: int = 0
    edges: int = 0
    chunks: int = 0
    embeddings_done: int = 0
    embeddings_total: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    files_by_language: Counter[str] = field(default_factory=Counter)
    nodes_by_language: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("skipped", "files_by_language", "nodes_by_language"):
            data[key] = dict(getattr(self, key))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Progress:
        progress = cls()
        for key, value in data.items():
            if key in ("skipped", "files_by_language", "nodes_by_language"):
                setattr(progress, key, Counter(value))
            elif hasattr(progress, key):
                setattr(progress, key, value)
        return progress


@dataclass
class Job:
    id: str
    kind: str  # repository | collection
    target: str
    state: str = "queued"  # queued | running | succeeded | failed
    error: str = ""
    progress: Progress = field(default_factory=Progress)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    started: float = 0.0  # monotonic, for progress.seconds
    requested_by: set[str] = field(default_factory=set)  # principals who submitted or joined

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")


JobBody = Callable[[Job], Awaitable[None]]


class JobManager:
    def __init__(self, pool: asyncpg.Pool, max_concurrent: int = 2) -> None:
        self._pool = pool
        self._jobs: dict[str, Job] = {}
        self._active: dict[tuple[str, str], Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max_concurrent)

    def active_job(self, kind: str, target: str) -> Job | None:
        return self._active.get((kind, target))

    async def submit(
        self, kind: str, target: str, body: JobBody, requested_by: str | None = None
    ) -> Job:
        """Starts `body` in the background, or returns the target's job already running
        (the caller, already authorised for the target, may then follow it too)."""
        existing = self._active.get((kind, target))
        if existing is not None:
            if requested_by and requested_by not in existing.requested_by:
                existing.requested_by.add(requested_by)
                await self._save(existing)
            return existing
        job = Job(uuid.uuid4().hex, kind, target)
        if requested_by:
            job.requested_by.add(requested_by)
        self._jobs[job.id] = job
        self._active[(kind, target)] = job
        await self._save(job)
        task = asyncio.create_task(self._run(job, body), name=f"index-{kind}-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: Job, body: JobBody) -> None:
        flusher: asyncio.Task[None] | None = None
        try:
            async with self._slots:
                job.state = "running"
                job.started = time.monotonic()
                await self._save(job)
                flusher = asyncio.create_task(self._flush_periodically(job))
                await body(job)
            job.state = "succeeded"
            job.progress.phase = "done"
        except asyncio.CancelledError:
            job.state, job.error = "failed", "cancelled (service stopping)"
            raise
        except Exception as err:  # a job reports its failure; it must not kill the service
            log.exception("index job failed", extra={"job": job.id, "target": job.target})
            job.state = "failed"
            job.error = getattr(err, "message", None) or str(err) or type(err).__name__
        finally:
            if flusher is not None:
                flusher.cancel()
            if job.started:
                job.progress.seconds = round(time.monotonic() - job.started, 3)
            job.finished_at = datetime.now(UTC)
            self._active.pop((job.kind, job.target), None)
            try:
                await asyncio.shield(self._save(job))
            except Exception:
                log.warning("could not record the job's final state", extra={"job": job.id})

    async def _flush_periodically(self, job: Job) -> None:
        while True:
            await asyncio.sleep(_FLUSH_EVERY_S)
            job.progress.seconds = round(time.monotonic() - job.started, 3)
            try:
                await self._save(job)
            except (asyncpg.PostgresError, OSError) as err:
                log.warning("job progress not saved", extra={"job": job.id, "error": str(err)})

    async def _save(self, job: Job) -> None:
        await self._pool.execute(
            """
            INSERT INTO index_jobs (id, kind, target, state, error, progress, created_at,
                                    updated_at, finished_at, requested_by)
            VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, now(), $8, $9)
            ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, error = EXCLUDED.error,
                progress = EXCLUDED.progress, updated_at = now(),
                finished_at = EXCLUDED.finished_at, requested_by = EXCLUDED.requested_by
            """,
            job.id,
            job.kind,
            job.target,
            job.state,
            job.error,
            json.dumps(job.progress.to_json()),
            job.created_at,
            job.finished_at,
            sorted(job.requested_by),
        )

    async def get(self, job_id: str) -> Job | None:
        job = self._jobs.get(job_id)
        if job is not None:
            if job.state == "running":
                job.progress.seconds = round(time.monotonic() - job.started, 3)
            return job
        row = await self._pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job_id)
        if row is None:
            return None
        stored = Job(
            row["id"],
            row["kind"],
            row["target"],
            row["state"],
            row["error"],
            Progress.from_json(json.loads(row["progress"])),
            row["created_at"],
            row["finished_at"],
            requested_by=set(row["requested_by"]),
        )
        stale = (datetime.now(UTC) - row["updated_at"]).total_seconds() > _STALE_AFTER_S
        if stored.active and stale:
            # Its runner stopped flushing progress: the process died before the outcome.
            stored.state, stored.error = "failed", "interrupted (the service restarted)"
        return stored

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

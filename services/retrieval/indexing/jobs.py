"""Indexing runs as durable background jobs; `index_jobs` is the queue.

A job is stored when it is accepted, with everything needed to run it: its kind and target,
the request (source, branch, flags; `RepositoryRequest`/`CollectionRequest` as JSON) and who
asked (`requester`). Each retrieval process runs `workers` loops that claim the oldest
runnable job with `SELECT ... FOR UPDATE SKIP LOCKED`, so several workers and several
replicas share one queue and never take the same job. A claim is a lease (`lease_s`),
renewed by a heartbeat every `heartbeat_s` that also saves the job's progress. A job whose
lease ran out (its worker died: kill -9, a lost node) is runnable again and is claimed by
the next free worker, here or on another replica; every claim counts as an attempt, and a
job interrupted `max_attempts` times fails with a message saying so. A worker that cannot
renew its lease (the row was taken over, or the database did not answer for most of a
lease) stops its run, so one job never runs twice at once; its final state is written only
while it still holds the lease.

One job per target: a partial unique index allows one queued or running job per (kind,
target), and a second request joins it (its principal is added to `requested_by`, who may
follow the job before its target exists). A job that fails (a bad source, a permission
withdrawn) fails for good. Two things make a job run again, each within its `max_attempts`:
a lost worker, and a transient error (svckit.errors.transient_database_error: the database
lost, frozen past a deadline, refusing connections for now; a TimeoutError). After such an
error the run keeps its lease, set to run out after a backoff (`retry_s`, doubling with
each attempt, at most RETRY_MAX_S); then any worker claims the job again as it would a lost
worker's, and the claim counts an attempt. If the database cannot even take that note, the
lease the run held runs out by itself, with the same outcome. The job's phase says it is
waiting to retry, and why; an error on the last attempt fails the job, saying how many
attempts it had. On a clean shutdown a running job goes back to the queue without counting
the attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg

from cograph_api.access_rules import Viewer
from svckit.errors import transient_database_error

log = logging.getLogger(__name__)

ACTIVE_STATES = ("queued", "running")
# The longest wait before a job that met a transient error is run again, in seconds.
RETRY_MAX_S = 300.0
_RETRY_PHASE = "waiting to retry"


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
    request: dict[str, Any] = field(default_factory=dict)  # what the runner needs, as JSON
    requester: Viewer = field(default_factory=lambda: Viewer(None, False))
    attempts: int = 0  # claims so far, this one included

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


JobRunner = Callable[[Job], Coroutine[Any, Any, None]]


class JobObserver(Protocol):
    """Hears how each run ends and how far it got (retrieval.metrics counts them)."""

    def job_ended(self, kind: str, end: str) -> None: ...

    def progressed(self, kind: str, files: int, embeddings: int) -> None: ...


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _storable(value: Any) -> Any:
    """`value` with NUL characters as U+FFFD: jsonb (like text) cannot hold them, and the
    index stores text the same way."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {k: _storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(v) for v in value]
    return value


def job_from_row(row: asyncpg.Record) -> Job:
    requester = _json(row["requester"]) or {}
    return Job(
        row["id"],
        row["kind"],
        row["target"],
        row["state"],
        row["error"],
        Progress.from_json(_json(row["progress"]) or {}),
        row["created_at"],
        row["finished_at"],
        requested_by=set(row["requested_by"]),
        request=_json(row["request"]) or {},
        requester=Viewer(requester.get("principal"), bool(requester.get("admin", False))),
        attempts=row["attempts"],
    )


def failure_message(err: BaseException) -> str:
    """What a failed job reports: the cause, not the task group that carried it (a
    pipeline stage's error arrives wrapped in an ExceptionGroup)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        leaves = [e for e in err.exceptions if not isinstance(e, asyncio.CancelledError)]
        err = (leaves or list(err.exceptions))[0]
    return getattr(err, "message", None) or str(err) or type(err).__name__


_CLAIM = """
WITH next AS (
    SELECT id FROM index_jobs
    WHERE state = 'queued' OR (state = 'running' AND lease_expires_at < now())
    ORDER BY created_at, id
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE index_jobs j SET state = 'running', lease_owner = $1,
    lease_expires_at = now() + make_interval(secs => $2), attempts = j.attempts + 1,
    updated_at = now()
FROM next WHERE j.id = next.id
RETURNING j.*
"""

_HEARTBEAT = """
UPDATE index_jobs SET lease_expires_at = now() + make_interval(secs => $3),
    progress = $4::jsonb, updated_at = now()
WHERE id = $1 AND lease_owner = $2 AND state = 'running'
"""

_FINISH = """
UPDATE index_jobs SET state = $3, error = $4, progress = $5::jsonb, finished_at = $6,
    updated_at = now(), lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2
"""

# A transient error: the lease is kept, to run out after the backoff, when any worker may
# claim the job again (an attempt counted, as for a lost worker).
_RETRY_LATER = """
UPDATE index_jobs SET lease_expires_at = now() + make_interval(secs => $3),
    progress = $4::jsonb, updated_at = now()
WHERE id = $1 AND lease_owner = $2 AND state = 'running'
"""

# A clean shutdown hands the job back: queued again, the attempt not counted.
_RELEASE = """
UPDATE index_jobs SET state = 'queued', progress = $3::jsonb, updated_at = now(),
    lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE id = $1 AND lease_owner = $2 AND state = 'running'
"""


class _LeaseLost(Exception):
    """This worker no longer holds the job's lease."""


class JobManager:
    def __init__(
        self,
        pool: asyncpg.Pool,
        workers: int = 2,
        *,
        lease_s: float = 30.0,
        heartbeat_s: float = 5.0,
        max_attempts: int = 3,
        poll_s: float = 1.0,
        retry_s: float = 2.0,
        observer: JobObserver | None = None,
    ) -> None:
        self._pool = pool
        self._observer = observer
        # Files and embeddings of each running job already reported to the observer.
        self._reported: dict[str, tuple[int, int]] = {}
        self._workers = workers
        self._lease_s = lease_s
        self._heartbeat_s = heartbeat_s
        self._max_attempts = max_attempts
        self._poll_s = poll_s
        self._retry_s = retry_s
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._jobs: dict[str, Job] = {}  # jobs this process is running, for fresh progress
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._runner: JobRunner | None = None
        self._closing = False

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def running(self) -> int:
        """Jobs this process is running now."""
        return len(self._jobs)

    def _report_progress(self, job: Job) -> None:
        """Tells the observer the files and embeddings done since the last report, so that
        their rates follow a long job as it runs (each heartbeat), not only when it ends."""
        if self._observer is None:
            return
        files, embeddings = job.progress.files_done, job.progress.embeddings_done
        last_files, last_embeddings = self._reported.get(job.id, (0, 0))
        self._reported[job.id] = (files, embeddings)
        self._observer.progressed(job.kind, files - last_files, embeddings - last_embeddings)

    def _ended(self, job: Job, end: str) -> None:
        if self._observer is not None:
            self._observer.job_ended(job.kind, end)

    def start(self, runner: JobRunner) -> None:
        """Starts the worker loops; `runner` runs one claimed job (raises on failure)."""
        self._runner = runner
        for n in range(self._workers):
            task = asyncio.create_task(self._work(), name=f"index-worker-{n}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def active_job(self, kind: str, target: str) -> Job | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM index_jobs WHERE kind = $1 AND target = $2 "
            "AND state IN ('queued', 'running')",
            kind,
            target,
        )
        return None if row is None else job_from_row(row)

    async def submit(
        self, kind: str, target: str, request: dict[str, Any], requester: Viewer
    ) -> Job:
        """Queues a job, or joins the target's queued or running one (the caller, already
        authorised for the target, may then follow it too)."""
        principals = [requester.principal_id] if requester.principal_id else []
        row = await self._pool.fetchrow(
            """
            INSERT INTO index_jobs (id, kind, target, state, progress, request, requester,
                                    requested_by)
            VALUES ($1, $2, $3, 'queued', $4::jsonb, $5::jsonb, $6::jsonb, $7)
            ON CONFLICT (kind, target) WHERE state IN ('queued', 'running') DO UPDATE
                SET requested_by = ARRAY(
                    SELECT DISTINCT p FROM unnest(index_jobs.requested_by
                                                  || EXCLUDED.requested_by) AS p ORDER BY p)
            RETURNING *
            """,
            uuid.uuid4().hex,
            kind,
            target,
            json.dumps(Progress().to_json()),
            json.dumps(_storable(request)),
            json.dumps({"principal": requester.principal_id, "admin": requester.admin}),
            principals,
        )
        assert row is not None
        self._wake.set()
        job = job_from_row(row)
        local = self._jobs.get(job.id)
        return self._overlay(job, local) if local is not None else job

    async def get(self, job_id: str) -> Job | None:
        row = await self._pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job_id)
        if row is None:
            return None
        job = job_from_row(row)
        local = self._jobs.get(job_id)
        if local is not None and job.state == "running":
            return self._overlay(job, local)
        expires = row["lease_expires_at"]
        if (
            job.state == "running"
            and expires is not None
            and expires < datetime.now(UTC)
            and not job.progress.phase.startswith(_RETRY_PHASE)
        ):
            # Its worker stopped; the next free worker takes it up again.
            job.progress.phase = "waiting to resume (its worker stopped)"
        return job

    @staticmethod
    def _overlay(stored: Job, local: Job) -> Job:
        """The stored job with the progress of the run in this process (saved only at
        each heartbeat)."""
        if local.state == "running" and local.started:
            local.progress.seconds = round(time.monotonic() - local.started, 3)
        stored.progress = local.progress
        return stored

    # ------------------------------------------------------------------ workers

    async def _work(self) -> None:
        while not self._closing:
            try:
                job = await self._claim()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the database is away: try again later
                log.warning("could not claim an index job", extra={"error": str(err)})
                job = None
            if job is None:
                await self._idle()
                continue
            await self._run(job)

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self._poll_s)
        self._wake.clear()

    async def _claim(self) -> Job | None:
        while True:
            row = await self._pool.fetchrow(_CLAIM, self._owner, self._lease_s)
            if row is None:
                return None
            job = job_from_row(row)
            if job.attempts <= self._max_attempts:
                return job
            phase = job.progress.phase
            job.state = "failed"
            job.error = (
                f"gave up after {self._max_attempts} attempts: the worker running it "
                f"stopped each time (last seen {phase!r})"
            )
            job.finished_at = datetime.now(UTC)
            log.warning("index job abandoned", extra={"job": job.id, "target": job.target})
            self._ended(job, "abandoned")
            await self._finish(job)

    async def _run(self, job: Job) -> None:
        assert self._runner is not None
        job.progress = Progress(phase="starting")
        job.started = time.monotonic()
        self._jobs[job.id] = job
        log.info(
            "index job started",
            extra={"job": job.id, "target": job.target, "attempt": job.attempts},
        )
        body = asyncio.create_task(self._runner(job), name=f"index-{job.kind}-{job.id}")
        lost = asyncio.Event()
        retry: Exception | None = None  # a transient error: run again after a backoff
        beat = asyncio.create_task(self._heartbeat(job, body, lost))
        try:
            try:
                await body
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this worker is stopping
                if lost.is_set():
                    raise _LeaseLost from None
                raise RuntimeError("the run was cancelled") from None
            job.state = "succeeded"
            job.progress.phase = "done"
        except _LeaseLost:
            log.warning("index job taken over; this run stopped", extra={"job": job.id})
            self._ended(job, "taken_over")
            return
        except asyncio.CancelledError:
            body.cancel()
            await asyncio.gather(body, return_exceptions=True)
            await self._release(job)
            raise
        except Exception as err:  # a job reports its failure; it must not kill the service
            transient = transient_database_error(err)
            if transient and job.attempts < self._max_attempts:
                retry = err
            else:
                log.exception("index job failed", extra={"job": job.id, "target": job.target})
                job.state = "failed"
                job.error = failure_message(err)
                if transient:
                    job.error = (
                        f"gave up after {job.attempts} attempts, each ended by a transient "
                        f"error; the last: {job.error}"
                    )
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            self._jobs.pop(job.id, None)
            self._report_progress(job)
            self._reported.pop(job.id, None)
        if retry is not None:
            # After the heartbeat has stopped: a late beat would renew the lease over it.
            self._ended(job, "retried")
            await self._retry_later(job, retry)
            return
        self._ended(job, job.state)
        job.progress.seconds = round(time.monotonic() - job.started, 3)
        job.finished_at = datetime.now(UTC)
        try:
            await asyncio.shield(self._finish(job))
        except Exception:
            log.warning("could not record the job's final state", extra={"job": job.id})

    async def _heartbeat(self, job: Job, body: asyncio.Task[None], lost: asyncio.Event) -> None:
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(self._heartbeat_s)
            job.progress.seconds = round(time.monotonic() - job.started, 3)
            self._report_progress(job)
            try:
                status = await self._pool.execute(
                    _HEARTBEAT,
                    job.id,
                    self._owner,
                    self._lease_s,
                    json.dumps(job.progress.to_json()),
                )
            except Exception as err:
                log.warning("job lease not renewed", extra={"job": job.id, "error": str(err)})
                if time.monotonic() - renewed > 0.8 * self._lease_s:
                    # Another worker may take it over any moment: stop first.
                    lost.set()
                    body.cancel()
                    return
                continue
            if status.endswith(" 0"):
                lost.set()
                body.cancel()
                return
            renewed = time.monotonic()

    async def _finish(self, job: Job) -> None:
        await self._pool.execute(
            _FINISH,
            job.id,
            self._owner,
            job.state,
            job.error,
            json.dumps(job.progress.to_json()),
            job.finished_at,
        )

    async def _retry_later(self, job: Job, err: Exception) -> None:
        """Leaves the job to be claimed again after a backoff (see the module docstring)."""
        delay = min(RETRY_MAX_S, self._retry_s * 2 ** max(0, job.attempts - 1))
        why = failure_message(err)
        job.progress.phase = (
            f"{_RETRY_PHASE} (attempt {job.attempts} of {self._max_attempts} ended by a "
            f"transient error: {why})"
        )
        job.progress.seconds = round(time.monotonic() - job.started, 3)
        log.warning(
            "index job met a transient error; it will be retried",
            extra={
                "job": job.id,
                "target": job.target,
                "attempt": job.attempts,
                "retry_in_s": delay,
                "error": f"{type(err).__name__}: {why}",
            },
        )
        try:
            await asyncio.shield(
                self._pool.execute(
                    _RETRY_LATER,
                    job.id,
                    self._owner,
                    delay,
                    json.dumps(job.progress.to_json()),
                )
            )
        except Exception:
            # The database is still away: the lease this run held runs out by itself, and
            # the job is claimed again then, just the same.
            log.warning("job retry not recorded; its lease will run out", extra={"job": job.id})

    async def _release(self, job: Job) -> None:
        try:
            await asyncio.shield(
                self._pool.execute(
                    _RELEASE, job.id, self._owner, json.dumps(job.progress.to_json())
                )
            )
        except Exception:
            log.warning("job not handed back; its lease will run out", extra={"job": job.id})

    async def close(self) -> None:
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

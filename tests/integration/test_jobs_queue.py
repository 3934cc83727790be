"""The durable job queue on the real PostgreSQL: several managers (as several replicas) with
several workers each share `index_jobs`, never run a job twice, join a second request for
a busy target, take over a job whose lease ran out, and give up after the attempts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from cograph_api.access_rules import Viewer
from retrieval.indexing.jobs import Job, JobManager

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = Viewer("root", True)


def _manager(pool: asyncpg.Pool, workers: int = 2, **kwargs: float) -> JobManager:
    options = {"lease_s": 2.0, "heartbeat_s": 0.2, "max_attempts": 3, "poll_s": 0.05}
    options.update(kwargs)
    return JobManager(pool, workers, **options)  # type: ignore[arg-type]


async def _wait_done(pool: asyncpg.Pool, ids: list[str], timeout_s: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        pending = await pool.fetchval(
            "SELECT count(*) FROM index_jobs WHERE id = ANY($1) AND state IN ('queued', 'running')",
            ids,
        )
        if pending == 0:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{pending} jobs still active"
        await asyncio.sleep(0.05)


@pytest_asyncio.fixture(loop_scope="session")
async def managers(retrieval_pool: asyncpg.Pool) -> AsyncIterator[list[JobManager]]:
    made: list[JobManager] = []
    yield made
    for manager in made:
        await manager.close()


async def test_two_replicas_share_the_queue_and_run_each_job_once(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    runs: Counter[str] = Counter()
    owners: dict[str, str] = {}
    running: set[str] = set()
    overlap: list[str] = []

    def runner_for(manager: JobManager):  # type: ignore[no-untyped-def]
        async def run(job: Job) -> None:
            if job.target in running:
                overlap.append(job.target)
            running.add(job.target)
            runs[job.id] += 1
            owners[job.id] = manager.owner
            job.progress.phase = "indexing"
            await asyncio.sleep(0.05)
            running.discard(job.target)

        return run

    first, second = _manager(retrieval_pool, 3), _manager(retrieval_pool, 3)
    managers.extend([first, second])
    # Jobs are queued before any worker runs: both replicas find them in the table.
    ids = [
        (await first.submit("repository", f"example.com/q/{n}", {"n": n}, ADMIN)).id
        for n in range(24)
    ]
    first.start(runner_for(first))
    second.start(runner_for(second))
    await _wait_done(retrieval_pool, ids)
    assert runs == Counter({i: 1 for i in ids}), runs
    assert not overlap
    assert len(set(owners.values())) == 2, "both replicas took jobs"
    states = await retrieval_pool.fetch(
        "SELECT state, attempts, lease_owner FROM index_jobs WHERE id = ANY($1)", ids
    )
    assert {(r["state"], r["attempts"], r["lease_owner"]) for r in states} == {
        ("succeeded", 1, None)
    }


async def test_a_second_request_for_a_busy_target_joins_its_job(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    release = asyncio.Event()
    runs: list[str] = []

    async def run(job: Job) -> None:
        runs.append(job.id)
        await release.wait()

    manager = _manager(retrieval_pool)
    managers.append(manager)
    manager.start(run)
    first = await manager.submit("collection", "notes", {"a": 1}, Viewer("alice", False))
    second = await manager.submit("collection", "notes", {"a": 2}, Viewer("bob", False))
    assert second.id == first.id
    assert second.requested_by == {"alice", "bob"}
    assert second.request == {"a": 1}  # the first request runs; the second follows it
    release.set()
    await _wait_done(retrieval_pool, [first.id])
    assert runs == [first.id]
    # Finished: a new request makes a new job.
    third = await manager.submit("collection", "notes", {"a": 3}, ADMIN)
    assert third.id != first.id


async def test_an_expired_lease_is_taken_over_and_the_old_run_stops(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    started: list[tuple[str, int]] = []
    stopped: list[str] = []
    hold, began = asyncio.Event(), asyncio.Event()

    def runner_for(name: str):  # type: ignore[no-untyped-def]
        async def run(job: Job) -> None:
            started.append((name, job.attempts))
            began.set()
            try:
                if name == "stuck":
                    await hold.wait()
            except asyncio.CancelledError:
                stopped.append(name)
                raise

        return run

    stuck = _manager(retrieval_pool, 1, heartbeat_s=0.2, lease_s=30)
    managers.append(stuck)
    stuck.start(runner_for("stuck"))
    job = await stuck.submit("repository", "example.com/lease/x", {}, ADMIN)
    await asyncio.wait_for(began.wait(), 10)
    # As if the stuck worker's process had stopped renewing: its lease runs out.
    await retrieval_pool.execute(
        "UPDATE index_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        job.id,
    )
    rescuer = _manager(retrieval_pool, 1)
    managers.append(rescuer)
    rescuer.start(runner_for("rescuer"))
    await _wait_done(retrieval_pool, [job.id])
    row = await retrieval_pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job.id)
    assert row is not None
    assert (row["state"], row["attempts"]) == ("succeeded", 2)
    assert started == [("stuck", 1), ("rescuer", 2)]
    # The stuck run learns at its next heartbeat that the job is no longer its own.
    for _ in range(50):
        if stopped:
            break
        await asyncio.sleep(0.05)
    assert stopped == ["stuck"]
    final = await retrieval_pool.fetchval("SELECT state FROM index_jobs WHERE id = $1", job.id)
    assert final == "succeeded"  # the stopped run wrote nothing over it


async def test_a_job_interrupted_too_often_fails_with_a_clear_error(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    ran: list[str] = []

    async def run(job: Job) -> None:
        ran.append(job.id)

    manager = _manager(retrieval_pool, 1, max_attempts=3)
    managers.append(manager)
    job = await manager.submit("repository", "example.com/doomed/x", {}, ADMIN)
    # Three workers claimed it and died: running, lease gone, three attempts spent.
    await retrieval_pool.execute(
        """
        UPDATE index_jobs SET state = 'running', attempts = 3, lease_owner = 'gone',
            lease_expires_at = now() - interval '1 second',
            progress = jsonb_set(progress, '{phase}', '"indexing"')
        WHERE id = $1
        """,
        job.id,
    )
    seen = await manager.get(job.id)
    assert seen is not None and seen.progress.phase == "waiting to resume (its worker stopped)"
    manager.start(run)
    await _wait_done(retrieval_pool, [job.id])
    final = await manager.get(job.id)
    assert final is not None and final.state == "failed" and not ran
    assert final.error == (
        "gave up after 3 attempts: the worker running it stopped each time (last seen 'indexing')"
    )


async def test_a_clean_shutdown_hands_the_running_job_back(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    began = asyncio.Event()

    async def forever(job: Job) -> None:
        began.set()
        await asyncio.Event().wait()

    leaving = _manager(retrieval_pool, 1)
    leaving.start(forever)
    job = await leaving.submit("repository", "example.com/handoff/x", {}, ADMIN)
    await asyncio.wait_for(began.wait(), 10)  # claimed: running, under its lease
    await leaving.close()
    row = await retrieval_pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job.id)
    assert row is not None
    assert (row["state"], row["attempts"], row["lease_owner"]) == ("queued", 0, None)

    async def quick(job: Job) -> None:
        return None

    successor = _manager(retrieval_pool, 1)
    managers.append(successor)
    successor.start(quick)
    await _wait_done(retrieval_pool, [job.id])
    assert (
        await retrieval_pool.fetchval("SELECT state FROM index_jobs WHERE id = $1", job.id)
        == "succeeded"
    )


async def test_a_request_with_nul_characters_is_stored(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    manager = _manager(retrieval_pool)
    managers.append(manager)
    request = {"documents": [{"path": "a.md", "content": "a\x00b"}], "name": "n\x00"}
    job = await manager.submit("collection", "nul", request, ADMIN)
    stored = await manager.get(job.id)
    assert stored is not None
    assert stored.request == {
        "documents": [{"path": "a.md", "content": "a\ufffdb"}],
        "name": "n\ufffd",
    }


async def test_a_transient_database_error_is_retried_within_the_attempts(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    attempts: list[int] = []

    async def run(job: Job) -> None:
        attempts.append(job.attempts)
        if len(attempts) == 1:
            # A real statement deadline, as a frozen server ends a statement: TimeoutError.
            async with retrieval_pool.acquire() as conn:
                await conn.execute("SELECT pg_sleep(5)", timeout=0.2)
        job.progress.phase = "indexing"

    manager = _manager(retrieval_pool, 1, retry_s=1.5)
    managers.append(manager)
    job = await manager.submit("repository", "example.com/transient/x", {}, ADMIN)
    manager.start(run)
    # Between the attempts the job says it waits to retry, and why.
    phases: list[str] = []
    deadline = asyncio.get_running_loop().time() + 15
    while asyncio.get_running_loop().time() < deadline:
        seen = await manager.get(job.id)
        assert seen is not None
        phases.append(seen.progress.phase)
        if seen.state in ("succeeded", "failed"):
            break
        await asyncio.sleep(0.05)
    final = await manager.get(job.id)
    assert final is not None
    assert (final.state, final.attempts) == ("succeeded", 2) and not final.error, final
    assert attempts == [1, 2]
    waiting = [p for p in phases if p.startswith("waiting to retry")]
    assert waiting, phases
    assert waiting[0].startswith("waiting to retry (attempt 1 of 3 ended by a transient error")


async def test_transient_errors_on_every_attempt_fail_the_job_saying_so(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    attempts: list[int] = []

    async def run(job: Job) -> None:
        attempts.append(job.attempts)
        raise asyncpg.InterfaceError("cannot perform operation: another operation is in progress")

    manager = _manager(retrieval_pool, 1, retry_s=0.1, max_attempts=3)
    managers.append(manager)
    job = await manager.submit("repository", "example.com/transient/y", {}, ADMIN)
    manager.start(run)
    await _wait_done(retrieval_pool, [job.id])
    final = await manager.get(job.id)
    assert final is not None and final.state == "failed"
    assert attempts == [1, 2, 3]  # the budget, not one more
    assert final.error == (
        "gave up after 3 attempts, each ended by a transient error; the last: "
        "cannot perform operation: another operation is in progress"
    )


async def test_an_error_that_is_not_transient_fails_at_once(
    retrieval_pool: asyncpg.Pool, managers: list[JobManager]
) -> None:
    attempts: list[int] = []

    async def run(job: Job) -> None:
        attempts.append(job.attempts)
        raise asyncpg.UniqueViolationError("duplicate key value violates unique constraint")

    manager = _manager(retrieval_pool, 1, retry_s=0.1)
    managers.append(manager)
    job = await manager.submit("repository", "example.com/permanent/z", {}, ADMIN)
    manager.start(run)
    await _wait_done(retrieval_pool, [job.id])
    final = await manager.get(job.id)
    assert final is not None and final.state == "failed" and attempts == [1]
    assert final.error == "duplicate key value violates unique constraint"

"""Sync end to end (retrieval/indexing/sync.py): a commit pushed to an indexed branch (the
default one and a second ref), a file added to an indexed directory, become searchable
without anyone asking, through the real retrieval service, embedder and PostgreSQL; a
failing source is checked less and less often; RETRIEVAL_SYNC_INTERVAL_S=0 does nothing;
replicas never claim the same target; REST and MCP show when a repository was last checked
and synced."""

from __future__ import annotations

import asyncio
import shutil
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.indexing.freshness import HeadProbe
from retrieval.indexing.jobs import JobManager
from retrieval.indexing.source_policy import LocalPolicy
from retrieval.indexing.sync import (
    SYNC_REQUESTER,
    Schedule,
    Syncer,
    Target,
    claim_due,
    directory_fingerprint,
)
from tests.integration.support.git_repos import MAR, commit_all, git, make_repo, write
from tests.integration.support.mcp_client import call, http_client
from tests.integration.support.retrieval import ADMIN, serving, wait_job
from tests.integration.support.stacks import gateway_stack
from tests.integration.support.stacks import wait_job as gateway_wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")


GIT_SLUG = "example.com/team/demo"
PLAIN_SLUG = "example.com/team/plain"
COLLECTION = "handbook"


async def _eventually(what: str, probe: object, timeout_s: float = 60.0) -> object:
    """Polls the coroutine function `probe` until it returns something truthy."""
    assert callable(probe)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting: {what}"
        await asyncio.sleep(0.1)


async def _repository(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, slug: str
) -> pb.Repository:
    reply = await stub.GetRepository(pb.GetRepositoryRequest(slug=slug), metadata=ADMIN, timeout=5)
    return reply.repository


async def _collection(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, name: str
) -> pb.Collection:
    reply = await stub.ListCollections(pb.ListCollectionsRequest(), metadata=ADMIN, timeout=5)
    return next(c for c in reply.collections if c.name == name)


async def _found(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    query: str,
    path: str,
    *,
    repo: str = "",
    collection: str = "",
    ref: str = "",
) -> bool:
    request = pb.SearchRequest(query=query, repo=repo, collection=collection, ref=ref)
    reply = await stub.Search(request, metadata=ADMIN, timeout=30)
    return any(r.path == path for r in reply.results)


async def test_changes_at_the_source_become_searchable_without_asking(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "demo")
    plain = tmp_path / "plain"
    write(plain, "tool.py", "def tool() -> int:\n    return 1\n")
    docs = tmp_path / "handbook"
    write(docs, "billing.md", "# Billing\n\nRetries happen nightly.\n")
    async with serving(
        fresh_db_url,
        tmp_path / "data",
        embedder_address,
        RETRIEVAL_SYNC_INTERVAL_S="0.3",
        RETRIEVAL_HEAD_CACHE_S="0",  # listings look the head up each time, as the sync does
    ) as (app, stub):
        assert app.sync is not None
        jobs = [
            (
                await stub.IndexRepository(
                    pb.IndexRepositoryRequest(source=str(repo), slug=GIT_SLUG), metadata=ADMIN
                )
            ).job,
            (
                await stub.IndexRepository(
                    pb.IndexRepositoryRequest(source=str(plain), slug=PLAIN_SLUG), metadata=ADMIN
                )
            ).job,
            (
                await stub.IndexCollection(
                    pb.IndexCollectionRequest(name=COLLECTION, directory=str(docs)),
                    metadata=ADMIN,
                )
            ).job,
        ]
        for job in jobs:
            await wait_job(stub, job.id)
        # A second ref of the repository, synced like its default branch.
        git(repo, "branch", "release")
        added = await stub.IndexRef(
            pb.IndexRefRequest(slug=GIT_SLUG, ref="release"), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, added.job.id)

        # Checked one interval after the index; the git repository is current, so nothing
        # is queued for it. (A directory's first check has no listing to compare with: it
        # is re-indexed once, which finds nothing changed.)
        async def checked() -> pb.Repository | None:
            found = await _repository(stub, GIT_SLUG)
            return found if found.HasField("last_checked_at") else None

        first = await _eventually("the first check", checked)
        assert isinstance(first, pb.Repository)
        assert first.freshness == pb.FRESHNESS_CURRENT
        assert not first.HasField("last_synced_at")
        old_commit = first.commit

        # The source moves: a commit on the indexed branch, a file in each directory.
        write(repo, "pkg/ledger.py", "def reconcile_ledger_entries(rows):\n    return rows\n")
        commit_all(repo, "add the ledger", MAR)
        head = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", "release")
        write(repo, "pkg/refunds.py", "def settle_refund_batches(rows):\n    return rows\n")
        commit_all(repo, "add refunds on the release branch", MAR)
        git(repo, "checkout", "-q", "main")
        write(plain, "audit.py", "def audit_trail_exporter() -> str:\n    return 'ok'\n")
        write(docs, "refunds.md", "# Refunds\n\nChargebacks are disputed within ninety days.\n")

        # Nobody calls index again.
        await _eventually(
            "the commit in search",
            lambda: _found(stub, "reconcile_ledger_entries", "pkg/ledger.py", repo=GIT_SLUG),
        )
        await _eventually(
            "the release branch's commit in search with its ref",
            lambda: _found(
                stub, "settle_refund_batches", "pkg/refunds.py", repo=GIT_SLUG, ref="release"
            ),
        )
        # Each branch's commit stays on its own ref.
        assert not await _found(stub, "settle_refund_batches", "pkg/refunds.py", repo=GIT_SLUG)
        assert not await _found(
            stub, "reconcile_ledger_entries", "pkg/ledger.py", repo=GIT_SLUG, ref="release"
        )
        await _eventually(
            "the plain directory's new file in search",
            lambda: _found(stub, "audit_trail_exporter", "audit.py", repo=PLAIN_SLUG),
        )
        await _eventually(
            "the collection's new document in search",
            lambda: _found(stub, "chargebacks disputed", "refunds.md", collection=COLLECTION),
        )

        synced = await _repository(stub, GIT_SLUG)
        assert synced.commit == head != old_commit
        assert synced.freshness == pb.FRESHNESS_CURRENT
        assert synced.HasField("last_synced_at")
        assert synced.last_synced_at.ToDatetime() >= first.last_checked_at.ToDatetime()
        assert synced.last_checked_at.ToDatetime() > first.last_checked_at.ToDatetime()
        plain_repo = await _repository(stub, PLAIN_SLUG)
        assert plain_repo.HasField("last_checked_at") and plain_repo.HasField("last_synced_at")
        collection = await _collection(stub, COLLECTION)
        assert collection.HasField("last_checked_at") and collection.HasField("last_synced_at")

        # The re-index was an ordinary job, queued by the sync as itself; incremental.
        rows = await app.pool.fetch(
            "SELECT requested_by, progress FROM index_jobs WHERE target = $1 ORDER BY created_at",
            GIT_SLUG,
        )
        assert [list(r["requested_by"]) for r in rows] == [["root"], [SYNC_REQUESTER.principal_id]]
        progress = await app.pool.fetchval(
            "SELECT progress->>'files_done' FROM index_jobs WHERE target = $1 "
            "AND 'cograph-sync' = ANY(requested_by)",
            GIT_SLUG,
        )
        assert progress == "1"  # only the new file was read and embedded


async def test_a_failing_source_is_checked_less_and_less_often(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "gone")
    async with serving(
        fresh_db_url,
        tmp_path / "data",
        embedder_address,
        RETRIEVAL_SYNC_INTERVAL_S="0.2",
        RETRIEVAL_SYNC_BACKOFF_MAX_S="30",
    ) as (app, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(repo), slug=GIT_SLUG), metadata=ADMIN
        )
        await wait_job(stub, started.job.id)
        shutil.rmtree(repo)  # the source is gone: every check fails

        waits: dict[int, timedelta] = {}

        async def failed_three_times() -> bool:
            row = await app.pool.fetchrow(
                "SELECT sync_failures, last_checked_at, sync_due_at FROM repositories "
                "WHERE slug = $1",
                GIT_SLUG,
            )
            assert row is not None
            if row["sync_failures"] and row["sync_due_at"] > row["last_checked_at"]:
                # The first sight after a check (a later claim moves the due time on).
                waits.setdefault(row["sync_failures"], row["sync_due_at"] - row["last_checked_at"])
            return bool(row["sync_failures"] >= 3)

        await _eventually("three failed checks", failed_three_times, timeout_s=30)
        # Each failure doubles the wait (0.4 s, 0.8 s, 1.6 s, each cut by up to 20 %).
        assert set(waits) >= {1, 2, 3}
        seconds = [waits[n].total_seconds() for n in (1, 2, 3)]
        assert seconds[0] < seconds[1] < seconds[2]
        for n, wait in zip((1, 2, 3), seconds, strict=True):
            assert 0.2 * 2**n * 0.8 - 0.01 <= wait <= 0.2 * 2**n + 0.01
        # Nothing was queued for a source that cannot be read.
        assert await app.pool.fetchval("SELECT count(*) FROM index_jobs") == 1
        got = await _repository(stub, GIT_SLUG)
        assert got.HasField("last_checked_at") and not got.HasField("last_synced_at")


async def test_sync_off_does_nothing(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "demo")
    async with serving(
        fresh_db_url, tmp_path / "data", embedder_address, RETRIEVAL_SYNC_INTERVAL_S="0"
    ) as (app, stub):
        assert app.sync is None
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(repo), slug=GIT_SLUG), metadata=ADMIN
        )
        await wait_job(stub, started.job.id)
        write(repo, "pkg/ledger.py", "def reconcile_ledger_entries(rows):\n    return rows\n")
        commit_all(repo, "add the ledger", MAR)
        await asyncio.sleep(1.0)  # what a 0.2 s interval would have used for several checks
        got = await _repository(stub, GIT_SLUG)
        assert got.freshness == pb.FRESHNESS_STALE
        assert not got.HasField("last_checked_at") and not got.HasField("last_synced_at")
        assert await app.pool.fetchval("SELECT count(*) FROM index_jobs") == 1


async def test_replicas_never_claim_the_same_target(retrieval_pool: asyncpg.Pool) -> None:
    await retrieval_pool.execute(
        """
        INSERT INTO repositories (slug, source, source_kind, indexed_at)
        SELECT 'example.com/team/r' || n, '/srv/r' || n, 'git', now() - interval '1 hour'
        FROM generate_series(1, 10) AS n
        """
    )
    # Not due: indexed moments ago, due later, never indexed; a collection of uploads.
    await retrieval_pool.execute(
        """
        INSERT INTO repositories (slug, source, source_kind, indexed_at, sync_due_at) VALUES
            ('example.com/team/fresh', '/srv/fresh', 'git', now(), NULL),
            ('example.com/team/later', '/srv/later', 'git', now() - interval '1 hour',
             now() + interval '1 hour'),
            ('example.com/team/new', '/srv/new', 'git', NULL, NULL);
        INSERT INTO collections (name, source, indexed_at) VALUES
            ('uploads', '', now() - interval '1 hour'),
            ('docs', '/srv/docs', now() - interval '1 hour');
        """
    )
    claims = await asyncio.gather(
        *(claim_due(retrieval_pool, "repository", 4, 300.0, 60.0) for _ in range(3))
    )
    slugs = [t.name for claim in claims for t in claim]
    assert sorted(len(c) for c in claims) == [2, 4, 4]
    assert len(set(slugs)) == 10 and all(s.startswith("example.com/team/r") for s in slugs)
    # Claimed means leased: nobody gets them again until the lease runs out.
    assert await claim_due(retrieval_pool, "repository", 4, 300.0, 60.0) == []
    collections = await claim_due(retrieval_pool, "collection", 4, 300.0, 60.0)
    assert [(c.name, c.source_kind) for c in collections] == [("docs", "dir")]
    assert await claim_due(retrieval_pool, "collection", 4, 300.0, 60.0) == []


async def test_rest_and_mcp_show_when_a_repository_was_checked_and_synced(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    """The gateway follows the proto (to_json): no gateway code for the new fields."""
    repo = make_repo(tmp_path / "demo")
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path / "stack",
        services=("retrieval",),
        service_env={"RETRIEVAL_SYNC_INTERVAL_S": "0.3"},
    ) as stack:
        async with stack.client(stack.admin_key) as admin:
            created = await admin.post(
                "/api/repositories", json={"source": str(repo), "slug": GIT_SLUG}
            )
            assert created.status_code == 202, created.text
            await gateway_wait_job(admin, created.json()["job"]["id"])
            shown = (await admin.get(f"/api/repositories/{GIT_SLUG}")).json()
            assert shown["last_synced_at"] is None  # null until the sync has re-indexed it

            write(repo, "pkg/ledger.py", "def reconcile_ledger_entries(rows):\n    return rows\n")
            commit_all(repo, "add the ledger", MAR)

            async def synced() -> dict[str, object] | None:
                got = (await admin.get(f"/api/repositories/{GIT_SLUG}")).json()
                return got if got["last_synced_at"] else None

            rest = await _eventually("last_synced_at over REST", synced)
            assert isinstance(rest, dict) and isinstance(rest["last_checked_at"], str)
            assert rest["commit"] == git(repo, "rev-parse", "HEAD")
            listed = (await admin.get("/api/repositories")).json()["repositories"]
            assert listed[0]["last_synced_at"] == rest["last_synced_at"]

        async with http_client(stack, stack.admin_key) as client:
            failed, status = await call(client, "cograph_status", {"repo": GIT_SLUG})
        assert not failed, status
        (entry,) = status["repositories"]
        assert entry["last_synced_at"] == rest["last_synced_at"]
        assert entry["last_checked_at"]


async def test_a_failed_sync_run_is_queued_again_later_and_a_busy_target_is_left_alone(
    retrieval_pool: asyncpg.Pool, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write(docs, "a.md", "# A\n")
    jobs = JobManager(retrieval_pool)  # not started: the queued jobs stay queued
    syncer = Syncer(
        retrieval_pool,
        jobs,
        HeadProbe(5.0, 0.0),
        LocalPolicy("any", tmp_path / "data", (), ()),
        Schedule(interval_s=10.0, backoff_max_s=1000.0, jitter=0.0),
        concurrency=2,
        check_timeout_s=5.0,
    )
    await retrieval_pool.execute(
        "INSERT INTO collections (name, source, indexed_at, sync_fingerprint) "
        "VALUES ('docs', $1, now() - interval '1 hour', $2)",
        str(docs),
        directory_fingerprint(docs),
    )

    async def claim() -> Target:
        # Due now, without waiting the interval.
        await retrieval_pool.execute("UPDATE collections SET sync_due_at = now()")
        (target,) = await claim_due(retrieval_pool, "collection", 2, 10.0, 60.0)
        return target

    async def state() -> asyncpg.Record:
        row = await retrieval_pool.fetchrow(
            "SELECT sync_failures, sync_job_id, last_checked_at, "
            "extract(epoch FROM sync_due_at - last_checked_at) AS wait FROM collections"
        )
        assert row is not None
        return row

    # Unchanged since the last check: nothing queued.
    await syncer.check(await claim())
    row = await state()
    assert (row["sync_failures"], row["sync_job_id"], row["wait"]) == (0, None, 10)
    assert await retrieval_pool.fetchval("SELECT count(*) FROM index_jobs") == 0

    # The run the previous check queued failed: queued again, one failure, a longer wait.
    failed = await jobs.submit("collection", "docs", {"name": "docs"}, SYNC_REQUESTER)
    await retrieval_pool.execute("UPDATE index_jobs SET state = 'failed' WHERE id = $1", failed.id)
    await retrieval_pool.execute("UPDATE collections SET sync_job_id = $1", failed.id)
    await syncer.check(await claim())
    row = await state()
    assert (row["sync_failures"], row["wait"]) == (1, 20)
    again = await jobs.active_job("collection", "docs")
    assert again is not None and row["sync_job_id"] == again.id != failed.id
    assert again.request["directory"] == str(docs)

    # Being indexed (that job is still queued): no verdict, no second job, checked later.
    checked_before = row["last_checked_at"]
    await syncer.check(await claim())
    row = await state()
    assert (row["sync_failures"], row["sync_job_id"]) == (1, again.id)
    assert row["last_checked_at"] > checked_before
    assert await retrieval_pool.fetchval("SELECT count(*) FROM index_jobs") == 2

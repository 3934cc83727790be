"""Searches and reads on a real streaming replica (COGRAPH_DATABASE_READ_URL).

A private primary (embedded PostgreSQL) and a hot standby made from it with
`pg_basebackup` (support/replica.py) stream WAL for real. Retrieval reads from the standby
while it is caught up, and from the primary when the standby has not replayed what the
reader must see: the reader's own index job, a revocation, a repository made private. A
standby that stops is left out without a failed request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bench.standby import streaming_replica
from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2 as pb
from commons.app import start_commons
from svckit.db import create_database
from svckit.embedded import EmbeddedPostgres
from tests.integration.support.commons import Caller, commons_settings
from tests.integration.support.git_repos import make_repo
from tests.integration.support.retrieval import ADMIN, ALICE, BOB, serving, wait_job
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/replicated"
# A lag bound longer than the test: a paused standby stays usable for readers who did not
# write, so each assertion below is about read-your-writes, not staleness.
REPLICA_SETTINGS = {"COGRAPH_REPLICA_CHECK_S": "0.1", "COGRAPH_REPLICA_MAX_LAG_S": "600"}


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_reads_go_to_a_caught_up_replica_and_writes_are_read_back(
    pg_home: Path, embedder_address: str, tmp_path: Path
) -> None:
    primary = EmbeddedPostgres(pg_home / "primary")
    server_url = primary.start()
    try:
        db_url = await create_database(server_url, "replicated")
        with streaming_replica(primary, pg_home / "replica") as replica:
            read_url = replica.url("replicated")
            env = {"COGRAPH_DATABASE_READ_URL": read_url, **REPLICA_SETTINGS}
            async with serving(db_url, tmp_path / "data", embedder_address, **env) as (app, stub):
                reads = app.reads
                assert reads is not None

                async def standby_usable() -> bool:
                    return reads.replicas[0].usable

                async def standby_left_out() -> bool:
                    return not reads.replicas[0].usable

                async def search(who: tuple[tuple[str, str], ...]) -> pb.SearchResponse:
                    return await stub.Search(
                        pb.SearchRequest(query="parse configuration files", top_k=5),
                        metadata=who,
                        timeout=30,
                    )

                # Nothing indexed: a reader with no writes reads the caught-up standby.
                await eventually(standby_usable, "the standby to be checked")
                assert (await search(BOB)).served_by == "replica-1"

                # The admin's index job publishes on the primary while the standby's replay is
                # paused.
                await replica.sql("SELECT pg_wal_replay_pause()")
                job = await stub.IndexRepository(
                    pb.IndexRepositoryRequest(
                        source=str(make_repo(tmp_path / "repo")), slug=SLUG, public=True
                    ),
                    metadata=ADMIN,
                    timeout=10,
                )
                await wait_job(stub, job.job.id)
                # A grant naming Alice is a write she reads back.
                await stub.GrantAccess(
                    pb.GrantAccessRequest(
                        principal_id="alice", repository=SLUG, role=pb.ACCESS_ROLE_READ
                    ),
                    metadata=ADMIN,
                    timeout=10,
                )
                await eventually(
                    lambda: _replay_behind(replica, db_url), "the standby to fall behind"
                )
                mine = await search(ALICE)
                assert mine.served_by == "primary"
                assert any(r.repo == SLUG for r in mine.results)
                # The standby itself does not have the repository yet: the primary was needed.
                assert await _repositories_on(read_url) == 0
                # Bob wrote nothing: he may read the standby's older, consistent state (a
                # new public repository is not a fence for every reader; a repository made
                # private is, below).
                assert (await search(BOB)).served_by == "replica-1"

                # Replay resumes: once the standby has it, Alice reads the standby too.
                await replica.sql("SELECT pg_wal_replay_resume()")

                async def alice_on_replica() -> bool:
                    answer = await search(ALICE)
                    return answer.served_by == "replica-1" and any(
                        r.repo == SLUG for r in answer.results
                    )

                await eventually(alice_on_replica, "Alice's search on the caught-up standby")

                # Made private while the standby is paused: nobody reads the stale public
                # state from it, the fence sends every reader to the primary.
                await replica.sql("SELECT pg_wal_replay_pause()")
                await stub.SetVisibility(
                    pb.SetVisibilityRequest(repository=SLUG, public=False),
                    metadata=ADMIN,
                    timeout=10,
                )
                bob = await search(BOB)
                assert bob.served_by == "primary"
                assert not any(r.repo == SLUG for r in bob.results)
                await replica.sql("SELECT pg_wal_replay_resume()")

                # A standby that stops is left out; reads go on, on the primary.
                replica.stop()
                await eventually(standby_left_out, "the stopped standby to be left out")
                answer = await search(ALICE)
                assert answer.served_by == "primary"
                assert any(r.repo == SLUG for r in answer.results)
                assert reads.served["replica-1"] > 0
    finally:
        primary.stop()


async def _replay_behind(replica: object, db_url: str) -> bool:
    import asyncpg

    conn = await asyncpg.connect(db_url)
    try:
        primary_lsn = await conn.fetchval("SELECT pg_current_wal_lsn()")
    finally:
        await conn.close()
    replayed = await replica.sql("SELECT pg_last_wal_replay_lsn()")  # type: ignore[attr-defined]
    return bool(replayed < primary_lsn)


async def _repositories_on(url: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM repositories"))
    finally:
        await conn.close()


async def test_the_commons_reads_its_notes_on_the_replica_and_its_writers_read_back(
    pg_home: Path, embedder_address: str
) -> None:
    primary = EmbeddedPostgres(pg_home / "primary")
    server_url = primary.start()
    try:
        db_url = await create_database(server_url, "notes")
        with streaming_replica(primary, pg_home / "replica") as replica:
            settings = commons_settings(
                db_url,
                embedder_address,
                COGRAPH_DATABASE_READ_URL=replica.url("notes"),
                **REPLICA_SETTINGS,
            )
            app = await start_commons(settings)
            try:
                reads = app.reads
                assert reads is not None
                async with signed_channel(f"127.0.0.1:{app.port}") as channel:
                    caller = Caller(commons_pb2_grpc.CommonsServiceStub(channel))

                    async def standby_usable() -> bool:
                        return reads.replicas[0].usable

                    await eventually(standby_usable, "the standby to be checked")
                    first = await caller.post("Retries", "Card charges retry three times.")

                    async def replayed() -> bool:
                        return not await _replay_behind(replica, db_url)

                    await eventually(replayed, "the first note on the standby")
                    before = reads.served["replica-1"]
                    listed = await caller.list_posts(as_="bob")
                    assert [p.id for p in listed.posts] == [first.id]
                    assert reads.served["replica-1"] == before + 1

                    # Replay paused: Alice's new note is read back from the primary; Bob,
                    # who wrote nothing, reads the standby's older list.
                    await replica.sql("SELECT pg_wal_replay_pause()")
                    second = await caller.post("Refunds", "Refunds go through the ledger.")
                    mine = await caller.list_posts(as_="alice")
                    assert {p.id for p in mine.posts} == {first.id, second.id}
                    theirs = await caller.list_posts(as_="bob")
                    assert [p.id for p in theirs.posts] == [first.id]

                    # Hidden by an admin: a fence for every reader; Bob's read goes to the
                    # primary and no longer sees the note.
                    await caller.stub.SetPostHidden(
                        commons_pb2.SetPostHiddenRequest(
                            post_id=first.id, hidden=True, reason="outdated"
                        ),
                        metadata=Caller.md("root", admin=True),
                        timeout=10,
                    )
                    hidden = await caller.list_posts(as_="bob")
                    assert first.id not in {p.id for p in hidden.posts}
                    assert second.id in {p.id for p in hidden.posts}
                    await replica.sql("SELECT pg_wal_replay_resume()")
            finally:
                await app.stop()
    finally:
        primary.stop()

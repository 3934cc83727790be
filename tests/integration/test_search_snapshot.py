"""One snapshot per answer: a publication that commits while a search is between its
statements (streams ranked, rows not yet hydrated) changes nothing in that answer, which
stays complete and from one commit; the next search sees the new commit.

The search engine runs against the service's real pool and the real index; the only test
device is the moment the publication happens: the pool the engine is given runs the
re-index, to its end, when the engine asks for the connection that hydrates the ranked
rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import cast

import asyncpg
import pytest
import pytest_asyncio

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.access_rules import Viewer
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.layers import stores_for, units_for
from retrieval.search.engine import SearchEngine
from retrieval.search.query import build_query
from retrieval.search.search_settings import SearchSettings
from retrieval.search.snapshot import Snapshots
from retrieval.search.streams import plan_streams
from svckit.config import Env
from tests.integration.support.git_repos import JAN, MAR, commit_all, git, write
from tests.integration.support.retrieval import retrieval_settings
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
SLUG = "example.com/team/charges"
FILES = 14


@pytest_asyncio.fixture(loop_scope="session")
async def retrieval_app(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> AsyncIterator[RetrievalApp]:
    settings = retrieval_settings(
        fresh_db_url, tmp_path / "data", embedder_address, RETRIEVAL_HEAD_CACHE_S="0"
    )
    app = await start_retrieval(settings)
    try:
        yield app
    finally:
        await app.stop()


class _PublishingPool:
    """The real pool, running `hook` (once, to its end) when the `at`-th connection is
    asked for."""

    def __init__(self, pool: asyncpg.Pool, at: int, hook: Callable[[], Awaitable[None]]):
        self._pool = pool
        self._at = at
        self._hook = hook
        self.acquired = 0

    def acquire(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        self.acquired += 1
        number = self.acquired

        @asynccontextmanager
        async def connection() -> AsyncIterator[asyncpg.Connection]:
            if number == self._at:
                await self._hook()
            async with self._pool.acquire() as conn:
                yield conn

        return connection()


def _write_version(root: Path, version: str) -> None:
    for i in range(FILES):
        write(
            root,
            f"charges/retry_{i:02d}.py",
            f'"""Charge retries, part {i} ({version})."""\n\n\n'
            f"def retry_failed_charge_{i}(card: str) -> str:\n"
            f'    """Retry a failed charge on the card, attempt {i}."""\n'
            f'    return card + "{version}"\n',
        )


async def _index(stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, root: Path) -> None:
    request = pb.IndexRepositoryRequest(source=str(root), slug=SLUG)
    started = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
    deadline = asyncio.get_running_loop().time() + 120
    while True:
        got = await stub.GetJob(pb.GetJobRequest(job_id=started.job.id), metadata=ADMIN, timeout=5)
        if got.job.state == pb.JOB_STATE_SUCCEEDED:
            return
        assert got.job.state != pb.JOB_STATE_FAILED, got.job.error
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)


async def test_a_publication_during_a_search_leaves_its_answer_whole(
    retrieval_app: RetrievalApp, tmp_path: Path
) -> None:
    root = tmp_path / "charges"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    _write_version(root, "v1")
    commit_all(root, "v1", JAN)
    first = git(root, "rev-parse", "HEAD").strip()
    _write_version(root, "v2")  # every file changes: every row of v1 is replaced
    commit_all(root, "v2", MAR)
    second = git(root, "rev-parse", "HEAD").strip()
    git(root, "reset", "-q", "--hard", first)  # main at v1; v2 stays in the object store

    settings = SearchSettings.from_env(Env({}))  # the defaults the service runs with
    query = build_query(
        settings, text="retry failed charge", repo=SLUG, top_k=10, streams=["lexical", "symbol"]
    )
    viewer = Viewer("root", True)
    tasks = plan_streams(
        {store: units_for(store, query.layers) for store in stores_for(query.layers)},
        query.streams,
        has_text=True,
    )

    async with signed_channel(f"127.0.0.1:{retrieval_app.port}") as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        await _index(stub, root)

        async def publish_second() -> None:
            git(root, "reset", "-q", "--hard", second)
            await _index(stub, root)

        # Connections: the snapshot's first, one per stream, then hydration's.
        pool = _PublishingPool(retrieval_app.pool, len(tasks) + 2, publish_second)
        engine = SearchEngine(cast(asyncpg.Pool, pool), None, settings, 2.0)
        outcome = await engine.search(query, viewer)
        assert pool.acquired > len(tasks) + 1, "the publication must have happened mid-search"

        assert len(outcome.results) == 10, [r.qualified_name for r in outcome.results]
        assert {hit.commit for hit in outcome.results} == {first}
        # The published version is the second one now, and the next search says so.
        after = await SearchEngine(retrieval_app.pool, None, settings, 2.0).search(query, viewer)
        assert len(after.results) == 10
        assert {hit.commit for hit in after.results} == {second}


async def test_a_stream_connection_ends_its_transaction_however_its_block_ends(
    retrieval_pool: asyncpg.Pool,
) -> None:
    """BEGIN, the snapshot import and the settings go in one round trip, and the block's end
    commits or rolls back: a failed statement leaves no transaction open, the settings do
    not outlive the block, and the pool's connections come back reusable."""
    snapshots = Snapshots(retrieval_pool, max_open=1)
    async with snapshots.open() as snapshot:
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with snapshot.connection("SET LOCAL work_mem = '3MB'") as conn:
                await conn.fetchval("SELECT 1 / 0")
        async with snapshot.connection("SET LOCAL work_mem = '3MB'") as conn:
            assert conn.is_in_transaction()
            row = await conn.fetchrow(
                "SELECT current_setting('transaction_isolation') AS isolation, "
                "current_setting('transaction_read_only') AS read_only, "
                "current_setting('work_mem') AS work_mem"
            )
            assert dict(row) == {
                "isolation": "repeatable read",
                "read_only": "on",
                "work_mem": "3MB",
            }
    for _ in range(3):  # every connection the pool holds, the leader's included
        async with retrieval_pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT current_setting('work_mem')") != "3MB"

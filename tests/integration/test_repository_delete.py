"""Deleting a repository: it runs under the indexer's statement budget, not a request's,
and once accepted it completes even when the caller stops waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import grpc
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.git_repos import make_repo
from tests.integration.support.retrieval import ADMIN, serving, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/doomed"


async def test_an_accepted_delete_outlives_the_request_budget_and_the_caller(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "doomed")
    # A one-second budget for request statements; the delete will wait longer than that.
    async with serving(
        fresh_db_url, tmp_path / "data", embedder_address, COGRAPH_DB_STATEMENT_TIMEOUT_S="1"
    ) as (_, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(root), slug=SLUG), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, started.job.id)

        blocker = await asyncpg.connect(fresh_db_url)
        try:
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("SELECT 1 FROM repositories WHERE slug = $1 FOR UPDATE", SLUG)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.DeleteRepository(
                    pb.DeleteRepositoryRequest(slug=SLUG), metadata=ADMIN, timeout=1.5
                )
            assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            await asyncio.sleep(1.5)  # the delete has now waited past the 1 s budget
            assert await blocker.fetchval("SELECT count(*) FROM repositories WHERE slug = $1", SLUG)
            await lock.rollback()
        finally:
            await blocker.close()

        async def gone() -> bool:
            listed = await stub.ListRepositories(
                pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5
            )
            return not any(r.slug == SLUG for r in listed.repositories)

        for _ in range(100):
            if await gone():
                break
            await asyncio.sleep(0.1)
        assert await gone(), "the accepted delete did not complete"
        nodes = await stub.Search(
            pb.SearchRequest(query="read_text", top_k=5), metadata=ADMIN, timeout=10
        )
        assert not [r for r in nodes.results if r.repo == SLUG]

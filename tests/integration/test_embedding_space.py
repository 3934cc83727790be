"""The embedding space (issue 16): which model a database's vectors come from, the check
that never mixes two models' vectors, and `cograph reembed`, with the real PostgreSQL, the
real embedder (all-MiniLM-L6-v2, 384 dimensions) and a second, real embedder service whose
`openai` backend talks to a fake OpenAI-compatible endpoint answering 8-dimension vectors.
The second model's name is hostile SQL: it must reach the database only as a parameter."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.embedder_client import EmbedderClient, Identity
from cograph_api.embedding_space import (
    HEALTH_NAME,
    MISMATCH_REASON,
    SpaceMismatch,
    column_dimensions,
    hold_for_write,
    read_record,
    reembed,
)
from commons.app import MIGRATIONS as COMMONS_MIGRATIONS
from commons.embedding_space import SPEC as COMMONS_SPEC
from embedder.app import EmbedderApp, start_embedder
from retrieval.embedding_space import SPEC as RETRIEVAL_SPEC
from retrieval.embedding_space import works as retrieval_works
from svckit.db import create_pool
from svckit.errors import reason_of
from svckit.migrations import migrate
from tests.integration.support.commons import commons_settings, running_commons
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.git_repos import make_repo
from tests.integration.support.openai_fake import FakeEmbeddingsEndpoint
from tests.integration.support.retrieval import ADMIN, serving
from tests.internal_auth import TEST_SECRET, signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

DIM = 8
# What the second embedder reports as its model: SQL that would do harm if it were spliced.
HOSTILE = "evil'); DROP TABLE code_nodes; DROP TABLE posts; --"
PACKAGED = Identity("all-MiniLM-L6-v2", 384)
# A query's embedding gets a loaded machine's deadline: this file tests which model the
# vectors belong to, not how fast a query is embedded (2 s ran out in a busy CI run).
FAST = {"EMBEDDING_SPACE_CHECK_S": "0.1", "EMBEDDER_TIMEOUT_S": "30"}
SLUG = "example.com/team/space"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeEmbeddingsEndpoint]:
    with FakeEmbeddingsEndpoint(DIM) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def other_embedder(endpoint: FakeEmbeddingsEndpoint) -> AsyncIterator[str]:
    """A real embedder service serving the hostile-named 8-dimension model; its address."""
    app: EmbedderApp = await start_embedder(
        embedder_settings(
            EMBEDDER_BACKEND="openai",
            EMBEDDER_OPENAI_BASE_URL=endpoint.base_url,
            EMBEDDER_OPENAI_MODEL=HOSTILE,
            EMBEDDER_OPENAI_API_KEY="sk-test",
        )
    )
    try:
        yield f"127.0.0.1:{app.port}"
    finally:
        await app.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def other_client(other_embedder: str) -> AsyncIterator[EmbedderClient]:
    channel = signed_channel(other_embedder)
    try:
        yield EmbedderClient(channel, timeout_s=30.0)
    finally:
        await channel.close(None)


async def wait_for(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def space_health(port: int) -> str:
    async with signed_channel(f"127.0.0.1:{port}") as channel:
        stub: Any = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=HEALTH_NAME), timeout=5)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


async def record_of(db_url: str, table: str) -> asyncpg.Record:
    conn = await asyncpg.connect(db_url)
    try:
        row = await conn.fetchrow(
            f"SELECT model, dimension, reembed_model, reembed_dimension FROM {table}"
        )
        assert row is not None
        return row
    finally:
        await conn.close()


async def run_job(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    request: pb.IndexRepositoryRequest | pb.IndexCollectionRequest,
) -> pb.Job:
    if isinstance(request, pb.IndexRepositoryRequest):
        job_id = (await stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job.id
    else:
        job_id = (await stub.IndexCollection(request, metadata=ADMIN, timeout=10)).job.id
    deadline = time.monotonic() + 240
    while True:
        job = (await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)).job
        if job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.1)


def collection(text: str) -> pb.IndexCollectionRequest:
    return pb.IndexCollectionRequest(
        name="runbooks",
        documents=[pb.Document(path="retries.md", content=f"# Retries\n\n## Cards\n\n{text}\n")],
    )


async def search(stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub) -> pb.SearchResponse:
    return await stub.Search(
        pb.SearchRequest(query="parse configuration files", top_k=10),
        metadata=ADMIN,
        timeout=30,
    )


async def nulls(db_url: str) -> int:
    conn = await asyncpg.connect(db_url)
    try:
        return int(
            await conn.fetchval(
                "SELECT (SELECT count(*) FROM code_nodes WHERE embedding IS NULL)"
                " + (SELECT count(*) FROM code_nodes"
                "    WHERE summary IS NOT NULL AND summary_embedding IS NULL)"
                " + (SELECT count(*) FROM repo_docs WHERE embedding IS NULL)"
                " + (SELECT count(*) FROM md_collection_chunks WHERE embedding IS NULL)"
            )
        )
    finally:
        await conn.close()


async def test_a_model_change_is_refused_until_reembed_moves_every_vector(
    fresh_db_url: str,
    embedder_address: str,
    other_embedder: str,
    other_client: EmbedderClient,
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    data = tmp_path / "data"
    # A fresh database: nothing recorded until the first write, which records its model.
    async with serving(fresh_db_url, data, embedder_address, **FAST) as (app, stub):
        row = await record_of(fresh_db_url, "retrieval_embedding_space")
        assert row["model"] is None and row["dimension"] is None
        job = await run_job(stub, pb.IndexRepositoryRequest(source=str(repo), slug=SLUG))
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
        job = await run_job(stub, collection("Card charges are retried three times."))
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
        row = await record_of(fresh_db_url, "retrieval_embedding_space")
        assert (row["model"], row["dimension"]) == (PACKAGED.model, PACKAGED.dimension)
        assert await space_health(app.port) == "SERVING"
        assert (await search(stub)).streams.vector == pb.STREAM_STATUS_OK

    # The embedder now serves another model: vectors are off, writing is refused.
    async with serving(fresh_db_url, data, other_embedder, **FAST) as (app, stub):

        async def reported() -> bool:
            return await space_health(app.port) == "NOT_SERVING"

        await wait_for(reported, "the mismatch to be reported")
        assert app.space is not None and app.space.reason is not None
        assert "cograph reembed" in app.space.reason
        answer = await search(stub)
        assert answer.streams.vector == pb.STREAM_STATUS_UNAVAILABLE
        assert dict(answer.streams.reasons) == {"vector": "embedding_model_mismatch"}
        assert answer.streams.lexical == pb.STREAM_STATUS_OK and answer.results
        job = await run_job(stub, collection("Card charges are retried five times."))
        assert job.state == pb.JOB_STATE_FAILED
        assert "refusing to index" in job.error and "cograph reembed" in job.error
        row = await record_of(fresh_db_url, "retrieval_embedding_space")
        assert (row["model"], row["dimension"]) == (PACKAGED.model, PACKAGED.dimension)

        # A re-embed interrupted after five vectors: the new model is not recorded yet,
        # the columns already have its dimension, and search still answers without vectors.
        works = retrieval_works("name_signature_body", 2000)
        conn = await asyncpg.connect(fresh_db_url)
        try:
            first = await reembed(conn, RETRIEVAL_SPEC, works, other_client, batch=2, stop_after=5)
            assert first.started and first.embedded == 5
            row = await record_of(fresh_db_url, "retrieval_embedding_space")
            assert row["model"] == PACKAGED.model
            assert (row["reembed_model"], row["reembed_dimension"]) == (HOSTILE, DIM)
            assert set((await column_dimensions(conn, RETRIEVAL_SPEC)).values()) == {DIM}
            left = await nulls(fresh_db_url)
            assert left > 0
            assert (await search(stub)).streams.vector == pb.STREAM_STATUS_UNAVAILABLE

            # Run again: it resumes (no second ALTER), fills the rest, records the model.
            second = await reembed(conn, RETRIEVAL_SPEC, works, other_client, batch=16)
            assert not second.started and second.embedded == left
            indexes = await conn.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE indexname = ANY($1::text[])",
                [c.index for c in RETRIEVAL_SPEC.columns],
            )
            assert indexes == len(RETRIEVAL_SPEC.columns)
            again = await reembed(conn, RETRIEVAL_SPEC, works, other_client)
            assert again.already and again.embedded == 0
        finally:
            await conn.close()
        assert await nulls(fresh_db_url) == 0
        row = await record_of(fresh_db_url, "retrieval_embedding_space")
        assert (row["model"], row["dimension"], row["reembed_model"]) == (HOSTILE, DIM, None)

        # The service sees the new record: vectors are back, with the new model's vectors.
        async def matched() -> bool:
            return await space_health(app.port) == "SERVING"

        await wait_for(matched, "the space to match again")
        answer = await search(stub)
        assert answer.streams.vector == pb.STREAM_STATUS_OK and not answer.streams.reasons
        assert any(p.stream == pb.STREAM_VECTOR for r in answer.results for p in r.provenance)
        job = await run_job(stub, collection("Card charges are retried five times."))
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
    # The hostile name was stored as text: both tables are still there.
    conn = await asyncpg.connect(fresh_db_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM code_nodes") > 0
    finally:
        await conn.close()


async def test_a_fresh_database_takes_the_first_writers_dimension(fresh_db_url: str) -> None:
    await migrate(fresh_db_url, "commons", COMMONS_MIGRATIONS)
    pool = await create_pool(fresh_db_url)
    try:
        async with pool.acquire() as conn:
            assert (await read_record(conn, COMMONS_SPEC)).identity is None
            assert await column_dimensions(conn, COMMONS_SPEC) == {"posts.embedding": 384}
            async with conn.transaction():
                await hold_for_write(conn, COMMONS_SPEC, Identity(HOSTILE, DIM))
            assert (await read_record(conn, COMMONS_SPEC)).identity == Identity(HOSTILE, DIM)
            assert await column_dimensions(conn, COMMONS_SPEC) == {"posts.embedding": DIM}
            # Another model may not write there now.
            with pytest.raises(SpaceMismatch, match="cograph reembed"):
                async with conn.transaction():
                    await hold_for_write(conn, COMMONS_SPEC, PACKAGED)
            assert await conn.fetchval("SELECT to_regclass('posts_embedding_hnsw') IS NOT NULL")
    finally:
        await pool.close()


async def test_commons_answers_mismatch_then_cograph_reembed_moves_the_notes(
    fresh_db_url: str, embedder_address: str, other_embedder: str
) -> None:
    async with running_commons(commons_settings(fresh_db_url, embedder_address, **FAST)) as c:
        first = await c.caller.post("Retries", "card charges are retried with backoff")
        await c.caller.wait_searchable(first.id)
        assert (await c.caller.search("how are charges retried")).results
    row = await record_of(fresh_db_url, "commons_embedding_space")
    assert (row["model"], row["dimension"]) == (PACKAGED.model, PACKAGED.dimension)

    settings = commons_settings(fresh_db_url, other_embedder, **FAST)
    async with running_commons(settings) as c:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await c.caller.search("how are charges retried")
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reason_of(caught.value) == MISMATCH_REASON
        assert "cograph reembed" in (caught.value.details() or "")
        second = await c.caller.post("Refunds", "refunds are issued from the console")
        await asyncio.sleep(0.5)  # its embedding task and a backfill pass have run
        assert not (await c.caller.get(second.id)).searchable

        # The operator command, as a process: re-embeds every note, records the model.
        env = {
            **os.environ,
            "COGRAPH_DATABASE_URL": fresh_db_url,
            "EMBEDDER_ADDR": other_embedder,
            "COGRAPH_INTERNAL_SECRET": TEST_SECRET,
        }
        env.pop("COGRAPH_INTERNAL_SECRET_FILE", None)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cograph_cli",
            "reembed",
            "--only",
            "commons",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        assert "re-embedded 2 vectors" in out.decode()
        assert b"\r" not in err  # no progress bar when stderr is not a terminal
        row = await record_of(fresh_db_url, "commons_embedding_space")
        assert (row["model"], row["dimension"], row["reembed_model"]) == (HOSTILE, DIM, None)

        async def answers() -> bool:
            try:
                return bool((await c.caller.search("how are charges retried")).results)
            except grpc.aio.AioRpcError:
                return False

        await wait_for(answers, "note search to answer with the new model")
        assert (await c.caller.get(second.id)).searchable

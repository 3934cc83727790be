"""The retrieval service as the search tests use it: principals, settings, a server with a
stub, waiting for a job, and the module-wide environment the `search_env` fixture yields."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from tests.internal_auth import signed_channel, with_secret

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
ALICE = (("x-cograph-principal", "alice"), ("x-cograph-admin", "0"))
BOB = (("x-cograph-principal", "bob"), ("x-cograph-admin", "0"))


def retrieval_settings(
    db_url: str, data_dir: Path, embedder_addr: str, **extra: str
) -> RetrievalSettings:
    return RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": db_url,
                    "COGRAPH_DATA_DIR": str(data_dir),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    "EMBEDDER_ADDR": embedder_addr,
                    **extra,
                }
            )
        )
    )


@asynccontextmanager
async def serving(
    db_url: str, data_dir: Path, embedder_addr: str, **extra: str
) -> AsyncIterator[tuple[RetrievalApp, retrieval_pb2_grpc.RetrievalServiceAsyncStub]]:
    """Another retrieval server on the same database (other settings), with a stub."""
    app = await start_retrieval(retrieval_settings(db_url, data_dir, embedder_addr, **extra))
    try:
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            yield app, retrieval_pb2_grpc.RetrievalServiceStub(channel)
    finally:
        await app.stop()


async def wait_job(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, job_id: str, timeout_s: float = 180
) -> pb.Job:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            assert reply.job.state == pb.JOB_STATE_SUCCEEDED, reply.job.error
            return reply.job
        assert asyncio.get_running_loop().time() < deadline, reply.job
        await asyncio.sleep(0.1)


@dataclass
class SearchEnv:
    db_url: str
    data_dir: Path
    embedder_addr: str
    app: RetrievalApp
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub
    pool: asyncpg.Pool

    async def search(
        self,
        query: str,
        metadata: tuple[tuple[str, str], ...] = ADMIN,
        stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub | None = None,
        **fields: object,
    ) -> pb.SearchResponse:
        request = pb.SearchRequest(query=query, **fields)  # type: ignore[arg-type]
        return await (stub or self.stub).Search(request, metadata=metadata, timeout=30)


def ranked(response: pb.SearchResponse) -> list[tuple[str, int]]:
    """(id, layer) pairs in result order: what determinism compares."""
    return [(r.id, r.layer) for r in response.results]


def stream_names(result: pb.SearchResult) -> Mapping[int, pb.Provenance]:
    return {p.stream: p for p in result.provenance}

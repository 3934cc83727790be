"""The embedded stack the evaluation runs on: PostgreSQL, the real embedder, retrieval.

PostgreSQL is embedded in a temporary directory (or COGRAPH_DATABASE_URL's server, in a
fresh database), the embedder runs as its own process the way production runs it (so its
CPU work does not contend with ours for the GIL), and the retrieval service runs in this
process and is called over gRPC like any other client would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import grpc

from bench.index import start_embedder
from bench.internal_auth import signed_channel, with_secret
from bench.quality.datasets import RepoCopy
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api.embedder_client import EmbedderClient
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from svckit.db import create_database, drop_database
from svckit.embedded import EmbeddedPostgres, cancelled_by_sigterm

_DONE = {retrieval_pb2.JOB_STATE_SUCCEEDED, retrieval_pb2.JOB_STATE_FAILED}


@dataclass
class Stack:
    """Handles to the running services."""

    app: RetrievalApp
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub
    embedder: EmbedderClient  # for the in-process stream runs of the tuning sweep
    pool: asyncpg.Pool
    settings: RetrievalSettings


@asynccontextmanager
async def running_stack(
    workdir: Path, extra_env: dict[str, str] | None = None
) -> AsyncIterator[Stack]:
    """The retrieval service, its embedder and PostgreSQL for one run; all stopped on
    exit, a SIGTERM included."""
    with cancelled_by_sigterm():
        async with _stack(workdir, extra_env) as stack:
            yield stack


@asynccontextmanager
async def _stack(workdir: Path, extra_env: dict[str, str] | None) -> AsyncIterator[Stack]:
    server: EmbeddedPostgres | None = None
    root_url = os.environ.get("COGRAPH_DATABASE_URL")
    if not root_url:
        server = EmbeddedPostgres(workdir / "pg")
        root_url = server.start()
    database = f"bench_quality_{uuid.uuid4().hex[:8]}"
    url = await create_database(root_url, database)
    process: subprocess.Popen[bytes] | None = None
    channels: list[grpc.aio.Channel] = []
    app: RetrievalApp | None = None
    try:
        process, address = await asyncio.to_thread(start_embedder, workdir)
        env = {
            "COGRAPH_DATABASE_URL": url,
            "COGRAPH_DATA_DIR": str(workdir / "data"),
            "RETRIEVAL_LISTEN": "127.0.0.1:0",
            "EMBEDDER_ADDR": address,
            "COGRAPH_LOG_LEVEL": "WARNING",
            # Indexing batches are large and this machine is small: a generous deadline.
            "RETRIEVAL_INDEX_EMBED_TIMEOUT_S": "600",
            # The evaluation runs several searches at once; a cold 2 s query deadline would
            # turn CPU contention into empty vector streams and measure the machine instead.
            "EMBEDDER_TIMEOUT_S": "30",
            **(extra_env or {}),
        }
        settings = RetrievalSettings.from_env(Env(with_secret(env)))
        app = await start_retrieval(settings)
        channel = signed_channel(f"127.0.0.1:{app.port}")
        embed_channel = signed_channel(address)
        channels += [channel, embed_channel]
        embedder = EmbedderClient(embed_channel, timeout_s=30.0)
        await embedder.embed(["warm up"])
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        yield Stack(app, stub, embedder, app.pool, settings)
    finally:
        for channel in channels:
            await channel.close(None)
        if app is not None:
            await app.stop()
        if process is not None:
            process.terminate()
            process.wait(timeout=30)
        await drop_database(root_url, database)
        if server is not None:
            server.stop()


# Server paths, `public` and new repositories are an admin's to index.
_OPERATOR = (("x-cograph-principal", "bench"), ("x-cograph-admin", "1"))


async def index_all(
    stack: Stack, repos: Sequence[RepoCopy], timeout_s: float = 3600
) -> dict[str, float]:
    """Indexes every repository over gRPC (public, so an anonymous search reads them),
    one job at a time as the service runs them; returns seconds per repository."""
    seconds: dict[str, float] = {}
    for repo in repos:
        reply = await stack.stub.IndexRepository(
            retrieval_pb2.IndexRepositoryRequest(
                source=str(repo.directory), slug=repo.slug, public=True
            ),
            metadata=_OPERATOR,
        )
        job = reply.job
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while job.state not in _DONE:
            if loop.time() > deadline:
                raise TimeoutError(f"indexing {repo.slug} took longer than {timeout_s} s")
            await asyncio.sleep(0.5)
            job = (
                await stack.stub.GetJob(
                    retrieval_pb2.GetJobRequest(job_id=job.id), metadata=_OPERATOR
                )
            ).job
        if job.state != retrieval_pb2.JOB_STATE_SUCCEEDED:
            raise RuntimeError(f"indexing {repo.slug} failed: {job.error}")
        seconds[repo.slug] = job.progress.seconds
    return seconds

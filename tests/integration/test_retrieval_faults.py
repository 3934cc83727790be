"""Faults with real processes: retrieval killed (-9) in the middle of an index resumes the job
after a restart without anyone re-submitting it, and the previous version stays searchable
meanwhile; an index submitted while the embedder is still loading waits for it and
succeeds; a stopped (SIGSTOP) embedder makes searches answer at once without their vector
stream once the circuit opens, and they have it again after SIGCONT."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.access_rules import Viewer
from retrieval.search.search_sql import Scope, symbol_sql
from svckit.db import create_pool
from tests.integration.support.embedders import MODEL_CACHE
from tests.integration.support.git_repos import commit_all, git, make_repo, write
from tests.integration.support.retrieval import ADMIN, serving
from tests.internal_auth import signed_channel, with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/faults/many"
FILES = 160


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _many_files(root: Path, prefix: str) -> None:
    for n in range(FILES):
        write(
            root,
            f"pkg/m{n:03d}.py",
            f'def {prefix}_{n}(x):\n    """{prefix} {n}."""\n    return x\n',
        )


def _wait_ready(process: subprocess.Popen[bytes], ready: Path, log: Path, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"did not start: {log.read_text()[-3000:]}")
        time.sleep(0.05)
    return int(ready.read_text())


@contextlib.contextmanager
def _process(
    module: str, workdir: Path, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`python -m module` with `env` (and the test secret); yields it and its bound port."""
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"{module}.ready"
    ready.unlink(missing_ok=True)
    log = workdir / f"{module}.log"
    name = module.upper()
    full = with_secret({**os.environ, **env, f"{name}_READY_FILE": str(ready)})
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", module], env=full, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process, _wait_ready(process, ready, log, 120)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _embedder(
    workdir: Path, port: int
) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[bytes], int]]:
    return _process(
        "embedder",
        workdir,
        {"EMBEDDER_LISTEN": f"127.0.0.1:{port}", "EMBEDDER_CACHE_DIR": str(MODEL_CACHE)},
    )


@contextlib.asynccontextmanager
async def _stub(port: int) -> AsyncIterator[retrieval_pb2_grpc.RetrievalServiceAsyncStub]:
    async with signed_channel(f"127.0.0.1:{port}") as channel:
        yield retrieval_pb2_grpc.RetrievalServiceStub(channel)


async def _job(stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, job_id: str) -> pb.Job:
    return (await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)).job


async def _finished(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, job_id: str, timeout_s: float
) -> pb.Job:
    deadline = time.monotonic() + timeout_s
    while True:
        job = await _job(stub, job_id)
        if job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.1)


async def _exact(pool: asyncpg.Pool, name: str) -> list[str]:
    """What the symbol stream finds named `name` exactly: the published index only."""
    sql, params = symbol_sql(Scope(Viewer("root", True), repo=SLUG), name, 20)
    async with pool.acquire() as conn:
        rows = await conn.fetch(sql, *params)
        ids = [r["id"] for r in rows if r["exact"]]
        found = await conn.fetch(
            "SELECT qualified_name FROM code_nodes WHERE id = ANY($1::bigint[])", ids
        )
    return sorted(r["qualified_name"] for r in found)


async def test_killed_retrieval_resumes_the_index_after_a_restart(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = tmp_path / "many"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    _many_files(root, "alpha")
    commit_all(root, "v1", "2024-01-01T00:00:00+00:00")
    env = {
        "COGRAPH_DATABASE_URL": fresh_db_url,
        "COGRAPH_DATA_DIR": str(tmp_path / "data"),
        "RETRIEVAL_LISTEN": "127.0.0.1:0",
        "EMBEDDER_ADDR": embedder_address,
        "RETRIEVAL_JOB_LEASE_S": "3",
        "RETRIEVAL_JOB_HEARTBEAT_S": "0.5",
        "RETRIEVAL_JOB_POLL_S": "0.2",
        # One text per call and one file per write: the run is long enough to be cut.
        "RETRIEVAL_EMBED_BATCH": "1",
        "RETRIEVAL_EMBED_CONCURRENCY": "1",
        "RETRIEVAL_WRITE_GROUP": "1",
        "RETRIEVAL_PARSE_WORKERS": "1",
    }
    request = pb.IndexRepositoryRequest(source=str(root), slug=SLUG)
    pool = await create_pool(fresh_db_url)
    try:
        with _process("retrieval", tmp_path / "a", env) as (first, port):
            async with _stub(port) as stub:
                started = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
                done = await _finished(stub, started.job.id, 120)
                assert done.state == pb.JOB_STATE_SUCCEEDED, done.error
                assert await _exact(pool, "alpha_7") == ["pkg.m007.alpha_7"]

                _many_files(root, "beta")
                commit_all(root, "v2", "2024-02-01T00:00:00+00:00")
                again = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
                job_id = again.job.id
                deadline = time.monotonic() + 60
                while (job := await _job(stub, job_id)).progress.files_done < 10:
                    assert job.state != pb.JOB_STATE_SUCCEEDED, "finished before the kill"
                    assert time.monotonic() < deadline, job
                    await asyncio.sleep(0.02)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(10)
        # Retrieval is dead midway: the job is still its, the previous version searchable.
        row = await pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job_id)
        assert row is not None and (row["state"], row["attempts"]) == ("running", 1)
        assert await pool.fetchval(
            "SELECT count(*) FROM code_nodes WHERE generation > "
            "(SELECT published_generation FROM repositories WHERE slug = $1)",
            SLUG,
        ), "part of the new version was written"
        assert await _exact(pool, "alpha_7") == ["pkg.m007.alpha_7"]
        assert await _exact(pool, "beta_7") == []

        # A new process takes the job up once its lease has run out; nobody re-submits.
        with _process("retrieval", tmp_path / "b", env) as (_second, port):
            async with _stub(port) as stub:
                done = await _finished(stub, job_id, 90)
                assert done.state == pb.JOB_STATE_SUCCEEDED, done.error
                reply = await stub.Search(
                    pb.SearchRequest(query="beta_7", repo=SLUG), metadata=ADMIN, timeout=10
                )
                assert reply.results[0].qualified_name == "pkg.m007.beta_7"
        row = await pool.fetchrow("SELECT * FROM index_jobs WHERE id = $1", job_id)
        assert row is not None and (row["state"], row["attempts"]) == ("succeeded", 2)
        assert await _exact(pool, "alpha_7") == []
        assert await _exact(pool, "beta_7") == ["pkg.m007.beta_7"]
        assert (
            await pool.fetchval("SELECT count(*) FROM code_nodes WHERE path = 'pkg/m007.py'") == 2
        )
    finally:
        await pool.close()


async def test_an_index_submitted_while_the_embedder_loads_waits_and_succeeds(
    fresh_db_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    repo = make_repo(tmp_path / "demo")
    async with serving(
        fresh_db_url, tmp_path / "data", f"127.0.0.1:{port}", RETRIEVAL_JOB_HEARTBEAT_S="0.5"
    ) as (_app, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(repo), slug="example.com/faults/early"),
            metadata=ADMIN,
            timeout=10,
        )
        deadline = time.monotonic() + 30
        while (
            job := await _job(stub, started.job.id)
        ).progress.phase != "waiting for the embedder":
            assert job.state in (pb.JOB_STATE_RUNNING, pb.JOB_STATE_QUEUED), job
            assert time.monotonic() < deadline, job
            await asyncio.sleep(0.05)
        with _embedder(tmp_path / "embedder", port):
            done = await _finished(stub, started.job.id, 90)
        assert done.state == pb.JOB_STATE_SUCCEEDED, done.error
        assert done.progress.files_done > 0


async def test_a_stopped_embedder_opens_the_circuit_and_searches_answer_at_once(
    fresh_db_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    repo = make_repo(tmp_path / "demo")
    with _embedder(tmp_path / "embedder", port) as (embedder, _):
        async with serving(
            fresh_db_url,
            tmp_path / "data",
            f"127.0.0.1:{port}",
            EMBEDDER_TIMEOUT_S="0.5",
            EMBEDDER_BREAKER_FAILURES="2",
            EMBEDDER_BREAKER_COOLDOWN_S="1",
        ) as (_app, stub):
            started = await stub.IndexRepository(
                pb.IndexRepositoryRequest(source=str(repo), slug="example.com/faults/demo"),
                metadata=ADMIN,
                timeout=10,
            )
            done = await _finished(stub, started.job.id, 90)
            assert done.state == pb.JOB_STATE_SUCCEEDED, done.error

            async def search() -> tuple[float, pb.SearchResponse]:
                began = time.monotonic()
                reply = await stub.Search(
                    pb.SearchRequest(query="ParseConfig"), metadata=ADMIN, timeout=10
                )
                return time.monotonic() - began, reply

            _, healthy = await search()
            assert healthy.streams.vector == pb.STREAM_STATUS_OK
            os.kill(embedder.pid, signal.SIGSTOP)
            try:
                # Two searches wait the deadline and open the circuit...
                for _ in range(2):
                    took, reply = await search()
                    assert reply.streams.vector == pb.STREAM_STATUS_UNAVAILABLE
                    assert took >= 0.45, took
                # ...then searches answer at once, from the other streams.
                for _ in range(5):
                    took, reply = await search()
                    assert reply.streams.vector == pb.STREAM_STATUS_UNAVAILABLE
                    assert reply.streams.lexical == pb.STREAM_STATUS_OK
                    assert reply.results[0].qualified_name.endswith("ParseConfig")
                    assert took < 0.3, took
            finally:
                os.kill(embedder.pid, signal.SIGCONT)
            # After the cool-down a probe goes through and the vector stream is back.
            await asyncio.sleep(1.1)
            deadline = time.monotonic() + 10
            while (reply := (await search())[1]).streams.vector != pb.STREAM_STATUS_OK:
                assert time.monotonic() < deadline, reply.streams
                await asyncio.sleep(0.2)

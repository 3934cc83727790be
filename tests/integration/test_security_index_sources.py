"""Indexing a source an attacker can write to, through the real retrieval service: a
repository whose own git configuration, hooks and working tree try to run code or to put
other bytes into the index, and a plain directory (repository and collection) whose file
flips between a regular file and a link to the service's secret while jobs run. Nothing
runs, and what is stored and read back is the committed (or the regular) bytes only."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_asyncio

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.app import RetrievalApp, start_retrieval
from tests.integration.support.hostile_repos import (
    COMMITTED,
    SECRET,
    UNCOMMITTED,
    make_hostile_repo,
)
from tests.integration.support.retrieval import retrieval_settings
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))


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


@pytest_asyncio.fixture(loop_scope="session")
async def stub(
    retrieval_app: RetrievalApp,
) -> AsyncIterator[retrieval_pb2_grpc.RetrievalServiceAsyncStub]:
    async with signed_channel(f"127.0.0.1:{retrieval_app.port}") as channel:
        yield retrieval_pb2_grpc.RetrievalServiceStub(channel)


async def _run(stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, started: pb.Job) -> pb.Job:
    deadline = asyncio.get_running_loop().time() + 120
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=started.id), metadata=ADMIN, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            assert reply.job.state == pb.JOB_STATE_SUCCEEDED, reply.job.error
            return reply.job
        assert asyncio.get_running_loop().time() < deadline, reply.job
        await asyncio.sleep(0.1)


async def _index(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, source: Path, slug: str
) -> pb.Job:
    request = pb.IndexRepositoryRequest(source=str(source), slug=slug)
    return await _run(stub, (await stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job)


async def _stored(app: RetrievalApp, needle: str) -> int:
    """Rows anywhere in the index (texts read and grep answer from, code, docs, chunks)
    that hold `needle`."""
    pattern = f"%{needle}%"
    return int(
        await app.pool.fetchval(
            """
            SELECT (SELECT count(*) FROM file_contents WHERE content LIKE $1)
                 + (SELECT count(*) FROM code_nodes WHERE body LIKE $1)
                 + (SELECT count(*) FROM repo_docs WHERE body LIKE $1)
                 + (SELECT count(*) FROM collection_document_contents WHERE content LIKE $1)
                 + (SELECT count(*) FROM md_collection_chunks WHERE body LIKE $1)
            """,
            pattern,
        )
    )


async def test_a_repository_whose_config_defines_drivers_and_hooks_runs_nothing(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    retrieval_app: RetrievalApp,
    tmp_path: Path,
) -> None:
    hostile = make_hostile_repo(tmp_path / "src")
    slug = "local/src/hostile"
    job = await _index(stub, hostile.root, slug)
    assert hostile.ran() == []
    assert job.progress.skipped["not_regular"] == 1  # the committed symlink
    stored = {
        r["path"]: r["content"]
        for r in await retrieval_app.pool.fetch(
            "SELECT f.path, f.content FROM file_contents f JOIN repositories r"
            " ON r.id = f.repository_id WHERE r.slug = $1",
            slug,
        )
    }
    assert stored == COMMITTED  # exactly the blobs: no filter, no edit, no untracked file
    assert await _stored(retrieval_app, SECRET) == 0
    assert await _stored(retrieval_app, UNCOMMITTED) == 0
    # Read answers from the same stored blob.
    read = await stub.ReadFile(
        pb.ReadFileRequest(repo=slug, path="notes/zz_target.md"), metadata=ADMIN, timeout=10
    )
    assert read.content == COMMITTED["notes/zz_target.md"]
    # A second run fetches into the same clone; still nothing runs.
    await _index(stub, hostile.root, slug)
    assert hostile.ran() == []


@contextmanager
def _flipping(target: Path, secret: Path) -> Iterator[None]:
    """`target` alternates between a regular file and a symlink to `secret` until the
    block ends, as fast as the machine goes; it ends as a symlink."""
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            staged = target.with_name(".staged")
            staged.write_text("# Target\n\nA plain note.\n")
            os.replace(staged, target)
            link = target.with_name(".link")
            os.symlink(secret, link)
            os.replace(link, target)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        yield
    finally:
        stop.set()
        flipper.join(timeout=10)


async def test_a_file_swapped_for_a_link_to_the_secret_during_indexing_never_leaks(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    retrieval_app: RetrievalApp,
    tmp_path: Path,
) -> None:
    data_secret = tmp_path / "admin.key"  # stands for the data directory's admin key
    data_secret.write_text(SECRET + "\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    for i in range(40):
        (plain / f"note_{i:02d}.md").write_text(f"# Note {i}\n\nAbout retries {i}.\n")
    target = plain / "zz_target.md"
    target.write_text("# Target\n\nA plain note.\n")
    slug = "local/tmp/plain"

    with _flipping(target, data_secret):
        for _ in range(3):
            await _index(stub, plain, slug)
            started = await stub.IndexCollection(
                pb.IndexCollectionRequest(name="flipping", directory=str(plain)),
                metadata=ADMIN,
                timeout=10,
            )
            await _run(stub, started.job)
            assert await _stored(retrieval_app, SECRET) == 0
    # It rests as a link: the next runs drop it, and the other files stay.
    await _index(stub, plain, slug)
    paths = {
        r["path"]
        for r in await retrieval_app.pool.fetch(
            "SELECT f.path FROM files f JOIN repositories r ON r.id = f.repository_id"
            " WHERE r.slug = $1",
            slug,
        )
    }
    assert "zz_target.md" not in paths and len(paths) == 40
    assert await _stored(retrieval_app, SECRET) == 0

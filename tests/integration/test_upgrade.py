"""Upgrading from an earlier release's schema with its data: a repository indexed before
file texts were stored (retrieval migrations 0001-0004) is marked by the upgrade, reported
stale with the reason, re-indexed in the background by the service itself, and then read
and grep answer from it and it is current again."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path

import asyncpg
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.app import MIGRATIONS, start_retrieval
from svckit.db import ensure_extensions
from svckit.migrations import migrate
from tests.integration.support.git_repos import git, make_repo
from tests.integration.support.retrieval import retrieval_settings
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
SLUG = "example.com/team/before-texts"
# The files the earlier release had indexed (the rest of the repository is new to it).
OLD_FILES = ("pkg/config.py", "README.md")


async def _as_the_earlier_release(dsn: str, tmp_path: Path, repo: Path) -> None:
    """The schema before file texts (0001-0004) and a repository it indexed."""
    earlier = tmp_path / "earlier-migrations"
    earlier.mkdir()
    for migration in sorted(MIGRATIONS.glob("000[1-4]_*.sql")):
        shutil.copy(migration, earlier / migration.name)
    await ensure_extensions(dsn)
    assert await migrate(dsn, "retrieval", earlier) == [1, 2, 3, 4]
    commit = git(repo, "rev-parse", "HEAD").strip()
    conn = await asyncpg.connect(dsn)
    try:
        repository_id = await conn.fetchval(
            "INSERT INTO repositories (slug, branch, source, source_kind, commit_sha, "
            "indexed_at, needs_linking, published_generation, file_count) "
            "VALUES ($1, 'main', $2, 'git', $3, now(), false, 1, $4) RETURNING id",
            SLUG,
            str(repo),
            commit,
            len(OLD_FILES),
        )
        for path in OLD_FILES:
            data = (repo / path).read_bytes()
            await conn.execute(
                "INSERT INTO files (repository_id, path, content_hash, language, store, "
                "size_bytes, generation) VALUES ($1, $2, $3, $4, $5, $6, 1)",
                repository_id,
                path,
                hashlib.sha256(data).hexdigest(),
                "markdown" if path.endswith(".md") else "python",
                "repo_docs" if path.endswith(".md") else "code",
                len(data),
            )
    finally:
        await conn.close()


async def test_an_index_without_file_texts_is_marked_and_reindexed_after_an_upgrade(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "src" / "demo")
    await _as_the_earlier_release(fresh_db_url, tmp_path, repo)

    # The upgrade's migrations mark what lacks texts (the service runs them at start).
    await migrate(fresh_db_url, "retrieval", MIGRATIONS)
    conn = await asyncpg.connect(fresh_db_url)
    try:
        marked = await conn.fetchrow(
            "SELECT reindex_reason, (SELECT count(*) FROM files f WHERE f.repository_id = r.id"
            " AND f.content_hash = '') AS cleared FROM repositories r WHERE slug = $1",
            SLUG,
        )
        assert "earlier release" in marked["reindex_reason"]
        assert marked["cleared"] == len(OLD_FILES)
    finally:
        await conn.close()

    settings = retrieval_settings(
        fresh_db_url, tmp_path / "data", embedder_address, RETRIEVAL_HEAD_CACHE_S="0"
    )
    app = await start_retrieval(settings)
    try:
        # Nobody asked: the service queued the re-index itself, as its own requester.
        job = await app.pool.fetchrow(
            "SELECT id, requester FROM index_jobs WHERE kind = 'repository' AND target = $1",
            SLUG,
        )
        assert job is not None and '"cograph-upgrade"' in job["requester"]
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            deadline = asyncio.get_running_loop().time() + 120
            while True:
                got = await stub.GetJob(
                    pb.GetJobRequest(job_id=job["id"]), metadata=ADMIN, timeout=5
                )
                if got.job.state == pb.JOB_STATE_SUCCEEDED:
                    break
                assert got.job.state != pb.JOB_STATE_FAILED, got.job.error
                assert asyncio.get_running_loop().time() < deadline, got.job
                await asyncio.sleep(0.2)

            read = await stub.ReadFile(
                pb.ReadFileRequest(repo=SLUG, path="pkg/config.py"), metadata=ADMIN, timeout=10
            )
            assert read.content == (repo / "pkg" / "config.py").read_text()
            grep = await stub.Grep(
                pb.GrepRequest(repo=SLUG, pattern="class ParseConfig"), metadata=ADMIN, timeout=10
            )
            assert [m.path for m in grep.matches] == ["pkg/config.py"]
            described = await stub.GetRepository(
                pb.GetRepositoryRequest(slug=SLUG), metadata=ADMIN, timeout=10
            )
            assert described.repository.freshness == pb.FRESHNESS_CURRENT
            assert described.repository.freshness_detail == ""
    finally:
        await app.stop()

    # And the earlier release's migrations now meet a newer schema: refused, by name.
    earlier = tmp_path / "earlier-migrations"
    with pytest.raises(Exception, match="newer than this release's 0004"):
        await migrate(fresh_db_url, "retrieval", earlier)

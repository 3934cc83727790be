"""The retrieval service over real gRPC: index jobs, GetJob, listing, ACL, collections,
deletion, and a git URL clone, against the real embedder and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_cli import index_cmd
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from tests.integration.support.git_repos import MAR, commit_all, git, make_repo, write
from tests.internal_auth import signed_channel, use_test_secret, with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
ALICE = (("x-cograph-principal", "alice"), ("x-cograph-admin", "0"))
BOB = (("x-cograph-principal", "bob"), ("x-cograph-admin", "0"))


@pytest_asyncio.fixture(loop_scope="session")
async def retrieval_app(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> AsyncIterator[RetrievalApp]:
    settings = RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": fresh_db_url,
                    "COGRAPH_DATA_DIR": str(tmp_path / "data"),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    "EMBEDDER_ADDR": embedder_address,
                    "RETRIEVAL_MAX_FILE_BYTES": "8000",
                    "RETRIEVAL_HEAD_CACHE_S": "0",
                }
            )
        )
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


async def _wait(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    job_id: str,
    timeout_s: float = 120,
    metadata: tuple[tuple[str, str], ...] = ADMIN,
) -> pb.Job:
    """Polls a job as `metadata`'s principal (a job is shown only to those who started it
    or may read its target)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=metadata, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            return reply.job
        assert asyncio.get_running_loop().time() < deadline, reply.job
        await asyncio.sleep(0.1)


async def test_health_is_serving(retrieval_app: RetrievalApp) -> None:
    async with signed_channel(f"127.0.0.1:{retrieval_app.port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="cograph.retrieval.v1.RetrievalService"),
            timeout=5,
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_index_job_flow_acl_and_delete(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "demo")
    # Server paths and new repositories are an admin's to index; Alice gets a read grant.
    request = pb.IndexRepositoryRequest(
        source=str(root), slug="example.com/team/demo", grant_principal_ids=["alice"]
    )
    started = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
    assert started.job.target == "example.com/team/demo"
    assert started.job.kind == pb.JOB_KIND_REPOSITORY
    # A second request while it runs joins the same job.
    again = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
    if again.job.state in (pb.JOB_STATE_QUEUED, pb.JOB_STATE_RUNNING):
        assert again.job.id == started.job.id
    job = await _wait(stub, started.job.id)
    assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
    p = job.progress
    assert p.phase == "done" and p.files_done == 7 and p.nodes > 10
    assert p.embeddings_done == p.embeddings_total > 0
    assert p.skipped["lockfile"] == 1 and p.files_by_language["python"] == 2
    assert p.seconds > 0 and job.finished_at.seconds > 0

    # Alice was granted it, so she can read it; Bob cannot, and learns nothing.
    listed = await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=ALICE, timeout=5)
    assert [r.slug for r in listed.repositories] == ["example.com/team/demo"]
    repo = listed.repositories[0]
    assert repo.branch == "main" and len(repo.commit) == 40 and repo.file_count == 7
    assert repo.files_by_language["python"] == 2 and repo.indexed_at.seconds > 0
    assert not (
        await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=BOB, timeout=5)
    ).repositories
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetRepository(
            pb.GetRepositoryRequest(slug="example.com/team/demo"), metadata=BOB, timeout=5
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DeleteRepository(
            pb.DeleteRepositoryRequest(slug="example.com/team/demo"), metadata=BOB, timeout=5
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    got = await stub.GetRepository(
        pb.GetRepositoryRequest(slug="example.com/team/demo"), metadata=ADMIN, timeout=5
    )
    assert got.repository.node_count == repo.node_count

    # Fresh against the branch's head until someone commits; then stale, with the new head.
    assert repo.freshness == pb.FRESHNESS_CURRENT and repo.head_commit == repo.commit
    write(root, "pkg/extra.py", "def extra() -> int:\n    return 1\n")
    commit_all(root, "add extra", MAR)
    got = await stub.GetRepository(
        pb.GetRepositoryRequest(slug="example.com/team/demo"), metadata=ALICE, timeout=5
    )
    assert got.repository.freshness == pb.FRESHNESS_STALE
    assert got.repository.head_commit == git(root, "rev-parse", "HEAD") != repo.commit

    # Reading is not owning: only an admin deletes.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DeleteRepository(
            pb.DeleteRepositoryRequest(slug="example.com/team/demo"), metadata=ALICE, timeout=10
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    deleted = await stub.DeleteRepository(
        pb.DeleteRepositoryRequest(slug="example.com/team/demo"), metadata=ADMIN, timeout=10
    )
    assert deleted.deleted
    assert not (
        await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5)
    ).repositories


async def test_git_url_is_cloned_with_a_derived_slug(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    retrieval_app: RetrievalApp,
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "srv" / "team" / "demo")
    started = await stub.IndexRepository(
        pb.IndexRepositoryRequest(source=root.as_uri(), public=True), metadata=ADMIN, timeout=10
    )
    assert started.job.target == "local/team/demo"
    job = await _wait(stub, started.job.id)
    assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
    # Public: anyone reads it; blame works in the clone.
    listed = await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=BOB, timeout=5)
    assert [r.slug for r in listed.repositories] == ["local/team/demo"]
    # A server path is the operator's: other keys see `local`, an admin the URL.
    assert listed.repositories[0].source == "local"
    as_admin = await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5)
    assert as_admin.repositories[0].source == root.as_uri()
    stamp = await retrieval_app.pool.fetchval(
        "SELECT last_changed_at FROM code_nodes WHERE qualified_name = 'pkg.config.ParseConfig'"
    )
    assert stamp.year == 2024 and stamp.month == 3
    clone = tmp_path / "data" / "repos" / "local" / "team" / "demo"
    assert (clone / ".git").is_dir() and not (clone / "pkg").exists()  # objects, no tree
    # Deleting the repository also removes our clone.
    await stub.DeleteRepository(
        pb.DeleteRepositoryRequest(slug="local/team/demo"), metadata=ADMIN, timeout=10
    )
    assert not clone.exists()


async def test_collection_from_directory_and_uploads(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    retrieval_app: RetrievalApp,
    tmp_path: Path,
) -> None:
    docs = tmp_path / "handbook"
    write(docs, "billing.md", "# Billing\n\nRetries happen nightly.\n\n## Declines\n\nCards.\n")
    write(docs, "guides/setup.md", "# Setup\n\nInstall the thing.\n")
    write(docs, "notes.txt", "not markdown\n")
    started = await stub.IndexCollection(
        pb.IndexCollectionRequest(
            name="handbook", description="How billing works", directory=str(docs)
        ),
        metadata=ADMIN,
        timeout=10,
    )
    job = await _wait(stub, started.job.id)
    assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
    assert job.progress.files_done == 2 and job.progress.chunks == 3
    assert job.progress.skipped["not_markdown"] == 1

    pool = retrieval_app.pool
    row = await pool.fetchrow("SELECT * FROM collections WHERE name = 'handbook'")
    assert row["heading_tree"] == (
        "billing.md: Billing\nbilling.md: Billing > Declines\nguides/setup.md: Setup"
    )
    assert row["document_count"] == 2 and row["chunk_count"] == 3
    heading_paths = [
        list(r["heading_path"])
        for r in await pool.fetch("SELECT heading_path FROM md_collection_chunks ORDER BY id")
    ]
    assert ["Billing", "Declines"] in heading_paths
    terms = {
        (r["source"], r["term"])
        for r in await pool.fetch("SELECT source, term FROM collection_terms")
    }
    assert {("label", "handbook"), ("description", "billing"), ("heading", "declines")} <= terms

    # Uploaded documents replace the set: the removed files leave the collection.
    started = await stub.IndexCollection(
        pb.IndexCollectionRequest(
            name="handbook", documents=[pb.Document(path="faq.md", content="# FAQ\n\nYes.\n")]
        ),
        metadata=ADMIN,
        timeout=10,
    )
    job = await _wait(stub, started.job.id)
    assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
    assert job.progress.files_removed == 2
    listed = await stub.ListCollections(pb.ListCollectionsRequest(), metadata=ADMIN, timeout=5)
    assert [(c.name, c.description, c.document_count) for c in listed.collections] == [
        ("handbook", "How billing works", 1)
    ]
    assert not (
        await stub.ListCollections(pb.ListCollectionsRequest(), metadata=BOB, timeout=5)
    ).collections


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (pb.IndexRepositoryRequest(source=""), grpc.StatusCode.INVALID_ARGUMENT),
        (pb.IndexRepositoryRequest(source="/no/such/dir"), grpc.StatusCode.INVALID_ARGUMENT),
        (pb.IndexRepositoryRequest(source="/tmp", slug="bad"), grpc.StatusCode.INVALID_ARGUMENT),
    ],
)
async def test_bad_index_requests(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    request_: pb.IndexRepositoryRequest,
    code: grpc.StatusCode,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IndexRepository(request_, metadata=ADMIN, timeout=10)
    assert caught.value.code() == code


async def test_unknown_job_is_not_found(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetJob(pb.GetJobRequest(job_id="nope"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_failed_job_reports_its_error(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    write(plain, "a.py", "def a():\n    return 1\n")
    started = await stub.IndexRepository(
        pb.IndexRepositoryRequest(source=str(plain), branch="dev"), metadata=ADMIN, timeout=10
    )
    job = await _wait(stub, started.job.id)
    assert job.state == pb.JOB_STATE_FAILED
    assert "not a git repository" in job.error


async def test_cli_index_and_collection_add(
    retrieval_app: RetrievalApp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    monkeypatch.setenv("RETRIEVAL_ADDR", f"127.0.0.1:{retrieval_app.port}")
    use_test_secret(monkeypatch)
    parser = argparse.ArgumentParser(prog="cograph")
    index_cmd.register(parser.add_subparsers(dest="command", required=True))
    root = make_repo(tmp_path / "cli-demo")
    args = parser.parse_args(["index", str(root), "--slug", "example.com/cli/demo"])
    assert await asyncio.to_thread(args.handler, args) == 0
    out = capsys.readouterr().out
    assert out.startswith("Indexed repository example.com/cli/demo @ main ")
    assert "python 2 files / 7 nodes" in out and "lockfile 1" in out

    docs = tmp_path / "notes"
    write(docs, "a.md", "# A\n\ntext\n")
    args = parser.parse_args(["collection", "add", "notes", str(docs), "--upload"])
    assert await asyncio.to_thread(args.handler, args) == 0
    assert "Indexed collection notes" in capsys.readouterr().out

    # --json: the finished job and the repository as the REST bodies hold them.
    args = parser.parse_args(["index", str(root), "--slug", "example.com/cli/demo", "--json"])
    assert await asyncio.to_thread(args.handler, args) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["job"]["state"] == "succeeded" and body["job"]["target"] == "example.com/cli/demo"
    assert body["repository"]["slug"] == "example.com/cli/demo"

    # Bad input is exit 2 with the reason; --json says it as {"error", "detail"}.
    args = parser.parse_args(["index", str(tmp_path / "missing-dir")])
    assert await asyncio.to_thread(args.handler, args) == 2
    assert "error: invalid_argument:" in capsys.readouterr().err
    args = parser.parse_args(["index", str(tmp_path / "missing-dir"), "--json"])
    assert await asyncio.to_thread(args.handler, args) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "invalid_argument"

"""Hostile requests against the write path, over real gRPC and through the REST gateway:
argument injection, remote-helper smuggling, server paths, the data directory, `..` slugs,
privilege escalation with a read grant, existence oracles, job visibility, and a source
that never answers. Each test checks the refusal and that nothing happened: no marker file
from an injected command, the repository still private, its source unchanged, not deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import pytest
import pytest_asyncio

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.stacks import Stack, gateway_stack, wait_job
from tests.internal_auth import signed_channel, with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

Metadata = tuple[tuple[str, str], ...]
ADMIN: Metadata = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
ALICE: Metadata = (("x-cograph-principal", "alice"), ("x-cograph-admin", "0"))
BOB: Metadata = (("x-cograph-principal", "bob"), ("x-cograph-admin", "0"))
if TYPE_CHECKING:
    Stub = retrieval_pb2_grpc.RetrievalServiceAsyncStub


def injected_sources(marker: Path) -> list[str]:
    """Sources that ran `touch marker` (or tried to) before sources were validated."""
    return [
        f"-ush:touch {marker};exit 1;",
        f"--upload-pack=touch {marker}",
        f"-c core.sshCommand=touch {marker}",
        f"ext::sh -c touch% {marker}",
        "fd::0",
        f"ssh://-oProxyCommand=touch%20{marker}/x/y",
        f"git@-oProxyCommand=touch {marker}:x/y",
        f"https://example.com/x/y\n--upload-pack=touch {marker}",
    ]


def injected_branches(marker: Path) -> list[str]:
    return [f"--upload-pack=touch {marker}", "-c", "a..b", "main\n-x", "@{-1}"]


def make_origin(root: Path, text: str = "def retry_charge():\n    return 1\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "billing/retry.py", text)
    commit_all(root, "first", JAN)
    return root


@dataclass
class Service:
    app: RetrievalApp
    stub: Stub
    data_dir: Path

    async def job(self, job_id: str, metadata: Metadata = ADMIN, timeout_s: float = 120) -> pb.Job:
        deadline = time.monotonic() + timeout_s
        while True:
            reply = await self.stub.GetJob(
                pb.GetJobRequest(job_id=job_id), metadata=metadata, timeout=5
            )
            if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
                return reply.job
            assert time.monotonic() < deadline, reply.job
            await asyncio.sleep(0.1)

    async def index(self, request: pb.IndexRepositoryRequest, metadata: Metadata = ADMIN) -> pb.Job:
        started = await self.stub.IndexRepository(request, metadata=metadata, timeout=10)
        job = await self.job(started.job.id)
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
        return job

    async def repository(self, slug: str) -> pb.Repository:
        reply = await self.stub.GetRepository(
            pb.GetRepositoryRequest(slug=slug), metadata=ADMIN, timeout=10
        )
        return reply.repository


@contextlib.asynccontextmanager
async def serving(
    database_url: str, embedder_address: str, data_dir: Path, **env: str
) -> AsyncIterator[Service]:
    settings = RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": database_url,
                    "COGRAPH_DATA_DIR": str(data_dir),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    "EMBEDDER_ADDR": embedder_address,
                    "RETRIEVAL_HEAD_CACHE_S": "0",
                    **env,
                }
            )
        )
    )
    app = await start_retrieval(settings)
    try:
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            yield Service(app, retrieval_pb2_grpc.RetrievalServiceStub(channel), data_dir)
    finally:
        await app.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def service(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> AsyncIterator[Service]:
    async with serving(fresh_db_url, embedder_address, tmp_path / "data") as running:
        yield running


async def rpc_error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


# ------------------------------------------------------------------ gRPC: sources


@pytest.mark.parametrize("metadata", [ADMIN, ALICE], ids=["admin", "agent"])
async def test_injected_sources_and_branches_never_reach_git(
    service: Service, tmp_path: Path, metadata: Metadata
) -> None:
    marker = tmp_path / "pwned"
    for source in injected_sources(marker):
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(source=source, slug="example.com/evil/repo"),
                metadata=metadata,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (source, error.details())
        assert "source" in (error.details() or "")
    origin = make_origin(tmp_path / "origin")
    for branch in injected_branches(marker):
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(
                    source=origin.as_uri(), slug="example.com/evil/repo", branch=branch
                ),
                metadata=metadata,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (branch, error.details())
        assert "branch" in (error.details() or "")
    await asyncio.sleep(0.5)  # anything started in the background would have run by now
    assert not marker.exists()
    listed = await service.stub.ListRepositories(
        pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5
    )
    assert not listed.repositories


async def test_agents_cannot_index_server_paths(service: Service, tmp_path: Path) -> None:
    origin = make_origin(tmp_path / "origin")
    for source in ("file:///etc", "/etc", str(origin), origin.as_uri(), str(service.data_dir)):
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(source=source, slug="example.com/evil/etc"),
                metadata=ALICE,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, source
        assert "needs an admin key" in (error.details() or "")
    error = await rpc_error(
        service.stub.IndexCollection(
            pb.IndexCollectionRequest(name="etc", directory="/etc"), metadata=ALICE, timeout=10
        )
    )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    listed = await service.stub.ListCollections(
        pb.ListCollectionsRequest(), metadata=ADMIN, timeout=5
    )
    assert not listed.collections


async def test_not_even_an_admin_indexes_the_data_directory(
    service: Service, tmp_path: Path
) -> None:
    data = service.data_dir
    data.mkdir(parents=True, exist_ok=True)
    (data / "admin.key").write_text("cg_secret_admin_key\n")
    link = tmp_path / "innocent-looking"
    link.symlink_to(data)
    for source in (str(data), str(data / "repos"), str(data.parent), data.as_uri(), str(link)):
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(source=source, slug="example.com/evil/data"),
                metadata=ADMIN,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, source
        assert "data directory" in (error.details() or "")
    for directory in (str(data), str(data.parent), str(link)):
        error = await rpc_error(
            service.stub.IndexCollection(
                pb.IndexCollectionRequest(name="keys", directory=directory),
                metadata=ADMIN,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, directory
    search = await service.stub.Search(
        pb.SearchRequest(query="cg_secret_admin_key", top_k=5), metadata=ADMIN, timeout=30
    )
    assert not search.results


async def test_dotdot_slugs_never_leave_the_clones(service: Service, tmp_path: Path) -> None:
    origin = make_origin(tmp_path / "origin")
    # A working tree with uncommitted work where `repos/<slug>` would have pointed.
    victim = make_origin(tmp_path / "victim", "def keep():\n    return 'committed'\n")
    write(victim, "billing/retry.py", "def keep():\n    return 'uncommitted work'\n")
    for slug in (
        "example.com/../../victim",
        "x/../../../victim",
        "../victim/x",
        "example.com/./victim",
        "example.com/victim/..",
    ):
        for source in (origin.as_uri(), str(origin)):
            error = await rpc_error(
                service.stub.IndexRepository(
                    pb.IndexRepositoryRequest(source=source, slug=slug, branch="main"),
                    metadata=ADMIN,
                    timeout=10,
                )
            )
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, slug
            assert "slug" in (error.details() or "")
    assert "uncommitted work" in (victim / "billing" / "retry.py").read_text()
    assert git(victim, "status", "--porcelain") == "M billing/retry.py"
    assert git(victim, "branch", "--show-current") == "main"


# ------------------------------------------------------------------ gRPC: roles


async def test_a_read_grant_is_not_ownership(service: Service, tmp_path: Path) -> None:
    origin = make_origin(tmp_path / "origin")
    slug = "example.com/acme/billing"
    first = await service.index(
        pb.IndexRepositoryRequest(source=str(origin), slug=slug, grant_principal_ids=["alice"])
    )
    stub = service.stub
    attempts: list[tuple[str, Callable[[], Any]]] = [
        (
            "re-index public",
            lambda: stub.IndexRepository(
                pb.IndexRepositoryRequest(source=str(origin), slug=slug, public=True),
                metadata=ALICE,
                timeout=10,
            ),
        ),
        (
            "swap source",
            lambda: stub.IndexRepository(
                pb.IndexRepositoryRequest(source="https://example.com/evil/billing", slug=slug),
                metadata=ALICE,
                timeout=10,
            ),
        ),
        (
            "grant others",
            lambda: stub.IndexRepository(
                pb.IndexRepositoryRequest(
                    source="https://example.com/evil/billing",
                    slug=slug,
                    grant_principal_ids=["bob"],
                ),
                metadata=ALICE,
                timeout=10,
            ),
        ),
        (
            "grant",
            lambda: stub.GrantAccess(
                pb.GrantAccessRequest(principal_id="bob", repository=slug),
                metadata=ALICE,
                timeout=10,
            ),
        ),
        (
            "grant write to self",
            lambda: stub.GrantAccess(
                pb.GrantAccessRequest(
                    principal_id="alice", repository=slug, role=pb.ACCESS_ROLE_WRITE
                ),
                metadata=ALICE,
                timeout=10,
            ),
        ),
        (
            "visibility",
            lambda: stub.SetVisibility(
                pb.SetVisibilityRequest(repository=slug, public=True), metadata=ALICE, timeout=10
            ),
        ),
        (
            "delete",
            lambda: stub.DeleteRepository(
                pb.DeleteRepositoryRequest(slug=slug), metadata=ALICE, timeout=10
            ),
        ),
    ]
    for what, call in attempts:
        error = await rpc_error(call())
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (what, error.details())
    repo = await service.repository(slug)
    assert (
        repo.public is False and repo.source == str(origin) and repo.commit == first_commit(origin)
    )
    bob_sees = await stub.ListRepositories(pb.ListRepositoriesRequest(), metadata=BOB, timeout=5)
    assert not bob_sees.repositories
    # Bob cannot even tell it exists: deleting it is "not found".
    error = await rpc_error(
        stub.DeleteRepository(pb.DeleteRepositoryRequest(slug=slug), metadata=BOB, timeout=10)
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert first.target == slug


def first_commit(origin: Path) -> str:
    return git(origin, "rev-parse", "HEAD")


async def test_a_public_repository_is_not_anyones_to_repoint(
    service: Service, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "origin")
    private = make_origin(tmp_path / "private", "def secret():\n    return 'hunter2'\n")
    slug = "example.com/acme/public"
    await service.index(pb.IndexRepositoryRequest(source=str(origin), slug=slug, public=True))
    for source in (str(private), "https://example.com/evil/repo"):
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(source=source, slug=slug), metadata=BOB, timeout=10
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, source
    repo = await service.repository(slug)
    assert repo.source == str(origin) and repo.public is True


async def test_unknown_and_unreadable_targets_answer_alike(
    service: Service, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "origin")
    await service.index(pb.IndexRepositoryRequest(source=str(origin), slug="example.com/a/hidden"))
    notes = await service.stub.IndexCollection(
        pb.IndexCollectionRequest(
            name="hidden-notes", documents=[pb.Document(path="a.md", content="# A\n\nx\n")]
        ),
        metadata=ADMIN,
        timeout=10,
    )
    assert (await service.job(notes.job.id)).state == pb.JOB_STATE_SUCCEEDED

    async def refusal(slug: str) -> tuple[grpc.StatusCode, str]:
        error = await rpc_error(
            service.stub.IndexRepository(
                pb.IndexRepositoryRequest(source="https://example.com/x/y.git", slug=slug),
                metadata=BOB,
                timeout=10,
            )
        )
        return error.code(), (error.details() or "").replace(slug, "<slug>")

    hidden, unknown = await refusal("example.com/a/hidden"), await refusal("example.com/a/none")
    assert (
        hidden
        == unknown
        == (
            grpc.StatusCode.PERMISSION_DENIED,
            "no repository <slug> that you may write to",
        )
    )

    async def collection_refusal(name: str) -> tuple[grpc.StatusCode, str]:
        error = await rpc_error(
            service.stub.IndexCollection(
                pb.IndexCollectionRequest(
                    name=name, documents=[pb.Document(path="b.md", content="# B\n")]
                ),
                metadata=BOB,
                timeout=10,
            )
        )
        return error.code(), (error.details() or "").replace(name, "<name>")

    assert await collection_refusal("hidden-notes") == await collection_refusal("no-such-notes")

    async def deletion(slug: str) -> tuple[grpc.StatusCode, str]:
        error = await rpc_error(
            service.stub.DeleteRepository(
                pb.DeleteRepositoryRequest(slug=slug), metadata=BOB, timeout=10
            )
        )
        return error.code(), (error.details() or "").replace(slug, "<slug>")

    assert (
        await deletion("example.com/a/hidden")
        == await deletion("example.com/a/none")
        == (grpc.StatusCode.NOT_FOUND, "no repository <slug>")
    )


async def test_jobs_are_shown_only_to_their_requesters_and_readers(
    service: Service, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "origin")
    job = await service.index(
        pb.IndexRepositoryRequest(
            source=str(origin), slug="example.com/acme/jobs", grant_principal_ids=["alice"]
        )
    )
    assert (await service.job(job.id, ALICE)).target == "example.com/acme/jobs"
    hidden = await rpc_error(
        service.stub.GetJob(pb.GetJobRequest(job_id=job.id), metadata=BOB, timeout=5)
    )
    unknown = await rpc_error(
        service.stub.GetJob(pb.GetJobRequest(job_id="f" * 32), metadata=BOB, timeout=5)
    )
    assert hidden.code() == unknown.code() == grpc.StatusCode.NOT_FOUND
    assert (hidden.details() or "").replace(job.id, "<id>") == (unknown.details() or "").replace(
        "f" * 32, "<id>"
    )
    # After a restart the job is read back from the database: still hidden from Bob.
    service.app.jobs._jobs.clear()
    again = await rpc_error(
        service.stub.GetJob(pb.GetJobRequest(job_id=job.id), metadata=BOB, timeout=5)
    )
    assert again.code() == grpc.StatusCode.NOT_FOUND
    assert (await service.job(job.id, ALICE)).state == pb.JOB_STATE_SUCCEEDED


async def test_write_grants_and_agent_created_sources(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    async with serving(
        fresh_db_url,
        embedder_address,
        tmp_path / "data",
        RETRIEVAL_CREATE_SOURCES="any",
        RETRIEVAL_LOCAL_SOURCES="any",
    ) as service:
        stub = service.stub
        # An agent creates a collection: it gets a write grant, nobody else sees it.
        docs = [pb.Document(path="a.md", content="# Alice\n\nnotes\n")]
        started = await stub.IndexCollection(
            pb.IndexCollectionRequest(name="alice-notes", documents=docs),
            metadata=ALICE,
            timeout=10,
        )
        assert (await service.job(started.job.id, ALICE)).state == pb.JOB_STATE_SUCCEEDED
        again = await stub.IndexCollection(
            pb.IndexCollectionRequest(name="alice-notes", documents=docs),
            metadata=ALICE,
            timeout=10,
        )
        assert (await service.job(again.job.id, ALICE)).state == pb.JOB_STATE_SUCCEEDED
        assert not (
            await stub.ListCollections(pb.ListCollectionsRequest(), metadata=BOB, timeout=5)
        ).collections
        hidden = await rpc_error(
            stub.GetJob(pb.GetJobRequest(job_id=started.job.id), metadata=BOB, timeout=5)
        )
        assert hidden.code() == grpc.StatusCode.NOT_FOUND
        # Under "any" a taken name is refused (and so revealed), never taken over.
        taken = await rpc_error(
            stub.IndexCollection(
                pb.IndexCollectionRequest(name="alice-notes", documents=docs),
                metadata=BOB,
                timeout=10,
            )
        )
        assert taken.code() == grpc.StatusCode.PERMISSION_DENIED
        # Creating is not administering: no public flag, no grants.
        for request in (
            pb.IndexCollectionRequest(name="bob-notes", documents=docs, public=True),
            pb.IndexCollectionRequest(name="bob-notes", documents=docs, grant_principal_ids=["x"]),
        ):
            error = await rpc_error(stub.IndexCollection(request, metadata=BOB, timeout=10))
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED

        # A write grant lets Alice re-index the admin's repository and change its source.
        first = make_origin(tmp_path / "first")
        second = make_origin(tmp_path / "second", "def refund():\n    return 2\n")
        slug = "example.com/acme/shared"
        await service.index(
            pb.IndexRepositoryRequest(source=str(first), slug=slug, grant_principal_ids=["alice"])
        )
        denied = await rpc_error(
            stub.IndexRepository(
                pb.IndexRepositoryRequest(source=str(second), slug=slug), metadata=ALICE, timeout=10
            )
        )
        assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "write grant" in (denied.details() or "")
        await stub.GrantAccess(
            pb.GrantAccessRequest(principal_id="alice", repository=slug, role=pb.ACCESS_ROLE_WRITE),
            metadata=ADMIN,
            timeout=10,
        )
        reindexed = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(second), slug=slug), metadata=ALICE, timeout=10
        )
        assert (await service.job(reindexed.job.id, ALICE)).state == pb.JOB_STATE_SUCCEEDED
        assert (await service.repository(slug)).source == str(second)
        # Still no admin: not public, not deleted.
        not_admin: list[Callable[[], Any]] = [
            lambda: stub.IndexRepository(
                pb.IndexRepositoryRequest(source=str(second), slug=slug, public=True),
                metadata=ALICE,
                timeout=10,
            ),
            lambda: stub.DeleteRepository(
                pb.DeleteRepositoryRequest(slug=slug), metadata=ALICE, timeout=10
            ),
        ]
        for call in not_admin:
            assert (await rpc_error(call())).code() == grpc.StatusCode.PERMISSION_DENIED
        # Lowering the grant to read takes re-indexing away again.
        revoked = await stub.RevokeAccess(
            pb.RevokeAccessRequest(
                principal_id="alice", repository=slug, role=pb.ACCESS_ROLE_WRITE
            ),
            metadata=ADMIN,
            timeout=10,
        )
        assert revoked.changed
        denied = await rpc_error(
            stub.IndexRepository(
                pb.IndexRepositoryRequest(source=str(first), slug=slug), metadata=ALICE, timeout=10
            )
        )
        assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
        repo = await service.repository(slug)
        assert repo.source == str(second) and repo.public is False


# ------------------------------------------------------------------ gRPC: bounded git


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


async def test_a_silent_source_is_cut_off_and_blocks_no_one(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, silent_server: int
) -> None:
    async with serving(
        fresh_db_url, embedder_address, tmp_path / "data", RETRIEVAL_GIT_TIMEOUT_S="8"
    ) as service:
        began = time.monotonic()
        slow = await service.stub.IndexRepository(
            pb.IndexRepositoryRequest(
                source=f"git://127.0.0.1:{silent_server}/x", slug="example.com/slow/x"
            ),
            metadata=ADMIN,
            timeout=10,
        )
        origin = make_origin(tmp_path / "origin")
        fast = await service.stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(origin), slug="example.com/fast/y"),
            metadata=ADMIN,
            timeout=10,
        )
        done = await service.job(fast.job.id)
        assert done.state == pb.JOB_STATE_SUCCEEDED, done.error
        # The other repository finished while the silent one still held its slot.
        still = await service.stub.GetJob(
            pb.GetJobRequest(job_id=slow.job.id), metadata=ADMIN, timeout=5
        )
        assert still.job.state == pb.JOB_STATE_RUNNING, still.job
        failed = await service.job(slow.job.id, timeout_s=60)
        elapsed = time.monotonic() - began
        assert failed.state == pb.JOB_STATE_FAILED
        assert "git clone did not finish within 8s" in failed.error, failed.error
        assert 7.5 < elapsed < 40, elapsed
        assert not (service.data_dir / "repos" / "example.com" / "slow" / "x").exists()


# ------------------------------------------------------------------ REST through the gateway


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path_factory.mktemp("gw-security"),
        services=("retrieval",),
    ) as running:
        yield running


@dataclass
class Clients:
    admin: httpx.AsyncClient
    alice: httpx.AsyncClient
    bob: httpx.AsyncClient


@pytest_asyncio.fixture(loop_scope="session")
async def rest(stack: Stack) -> AsyncIterator[Clients]:
    async with (
        stack.client(stack.admin_key) as admin,
        stack.client(await stack.key("alice")) as alice,
        stack.client(await stack.key("bob")) as bob,
    ):
        yield Clients(admin, alice, bob)


async def test_rest_refuses_injection_paths_and_traversal(
    stack: Stack, rest: Clients, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    origin = make_origin(tmp_path / "origin")
    for client in (rest.admin, rest.alice):
        for source in injected_sources(marker):
            reply = await client.post(
                "/api/repositories", json={"source": source, "slug": "example.com/evil/repo"}
            )
            assert reply.status_code == 400, (source, reply.text)
        for branch in injected_branches(marker):
            reply = await client.post(
                "/api/repositories",
                json={"source": origin.as_uri(), "slug": "example.com/evil/repo", "branch": branch},
            )
            assert reply.status_code == 400, (branch, reply.text)
        for slug in ("example.com/../../victim", "../x/y", "example.com/x/.."):
            reply = await client.post(
                "/api/repositories", json={"source": origin.as_uri(), "slug": slug}
            )
            assert reply.status_code == 400, (slug, reply.text)
    # Server paths: never for an agent; never the data directory or above, even for an admin.
    retrieval_data = stack.data_dir / "retrieval"
    for source in ("file:///etc", "/etc", str(origin)):
        reply = await rest.alice.post(
            "/api/repositories", json={"source": source, "slug": "example.com/evil/etc"}
        )
        assert reply.status_code == 403, (source, reply.text)
    reply = await rest.alice.post("/api/collections", json={"name": "etc", "directory": "/etc"})
    assert reply.status_code == 403, reply.text
    assert (stack.data_dir / "admin.key").exists()
    for source in (str(retrieval_data), str(stack.data_dir), retrieval_data.as_uri()):
        reply = await rest.admin.post(
            "/api/repositories", json={"source": source, "slug": "example.com/evil/data"}
        )
        assert reply.status_code == 403 and "data directory" in reply.json()["detail"], reply.text
        reply = await rest.admin.post(
            "/api/collections", json={"name": "data", "directory": source.removeprefix("file://")}
        )
        assert reply.status_code == 403, reply.text
    await asyncio.sleep(0.5)
    assert not marker.exists()
    assert (await rest.admin.get("/api/repositories")).json()["repositories"] == []


async def test_rest_write_routes_with_a_read_grant(
    stack: Stack, rest: Clients, tmp_path: Path
) -> None:
    origin = make_origin(tmp_path / "origin")
    slug = "example.com/acme/ledger"
    started = await rest.admin.post(
        "/api/repositories",
        json={"source": str(origin), "slug": slug, "grant_principal_ids": ["alice"]},
    )
    assert started.status_code == 202, started.text
    job_id = started.json()["job"]["id"]
    assert (await wait_job(rest.admin, job_id))["state"] == "succeeded"
    collection = await rest.admin.post(
        "/api/collections",
        json={
            "name": "ledger-notes",
            "documents": [{"path": "a.md", "content": "# Ledger\n\nnotes\n"}],
            "grant_principal_ids": ["alice"],
        },
    )
    assert (await wait_job(rest.admin, collection.json()["job"]["id"]))["state"] == "succeeded"

    escalations: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/api/repositories", {"source": str(origin), "slug": slug, "public": True}),
        ("POST", "/api/repositories", {"source": "https://example.com/evil/x", "slug": slug}),
        (
            "POST",
            "/api/repositories",
            {"source": "https://example.com/evil/x", "slug": slug, "grant_principal_ids": ["bob"]},
        ),
        (
            "POST",
            "/api/collections",
            {"name": "ledger-notes", "documents": [{"path": "b.md", "content": "# Evil\n"}]},
        ),
        ("POST", "/api/access/grant", {"principal_id": "bob", "repository": slug}),
        (
            "POST",
            "/api/access/grant",
            {"principal_id": "alice", "repository": slug, "role": "write"},
        ),
        ("POST", "/api/access/revoke", {"principal_id": "alice", "repository": slug}),
        ("POST", "/api/access/visibility", {"repository": slug, "public": True}),
        ("DELETE", f"/api/repositories/{slug}", None),
    ]
    for method, path, body in escalations:
        reply = await rest.alice.request(method, path, json=body)
        assert reply.status_code == 403, (method, path, body, reply.text)
        assert reply.json()["error"] == "permission_denied"

    repo = (await rest.admin.get(f"/api/repositories/{slug}")).json()
    assert repo["public"] is False and repo["source"] == str(origin)
    notes = (await rest.admin.get("/api/collections")).json()["collections"]
    assert [(c["name"], c["document_count"]) for c in notes] == [("ledger-notes", 1)]

    # Bob, with no grant, sees nothing: not the repository, not its job.
    assert (await rest.bob.delete(f"/api/repositories/{slug}")).status_code == 404
    hidden_job = await rest.bob.get(f"/api/jobs/{job_id}")
    unknown_job = await rest.bob.get(f"/api/jobs/{'0' * 32}")
    assert hidden_job.status_code == unknown_job.status_code == 404
    assert (await rest.alice.get(f"/api/jobs/{job_id}")).status_code == 200
    # An unknown name and an unreadable one are refused in the same words.
    refusals = []
    for name in (slug, "example.com/acme/none"):
        reply = await rest.bob.post(
            "/api/repositories", json={"source": "https://example.com/x/y.git", "slug": name}
        )
        refusals.append((reply.status_code, reply.json()["detail"].replace(name, "<slug>")))
    assert refusals[0] == refusals[1] == (403, "no repository <slug> that you may write to")

    # Write grant: re-indexing is allowed (from a URL; server paths stay an admin's).
    raised = await rest.admin.post(
        "/api/access/grant", json={"principal_id": "alice", "repository": slug, "role": "write"}
    )
    assert raised.json() == {"changed": True}
    again = await rest.alice.post("/api/repositories", json={"source": str(origin), "slug": slug})
    assert again.status_code == 403 and "admin key" in again.json()["detail"]
    assert (await rest.alice.delete(f"/api/repositories/{slug}")).status_code == 403
    assert (await rest.admin.get(f"/api/repositories/{slug}")).status_code == 200


async def test_a_creation_in_progress_is_not_joined_by_another_key(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, silent_server: int
) -> None:
    async with serving(
        fresh_db_url,
        embedder_address,
        tmp_path / "data",
        RETRIEVAL_CREATE_SOURCES="any",
        RETRIEVAL_GIT_TIMEOUT_S="4",
        # The silent source is on 127.0.0.1, which only admins may name by default.
        RETRIEVAL_PRIVATE_SOURCES="any",
    ) as service:
        request = pb.IndexRepositoryRequest(
            source=f"git://127.0.0.1:{silent_server}/x", slug="example.com/alice/x"
        )
        mine = await service.stub.IndexRepository(request, metadata=ALICE, timeout=10)
        # Bob asks for the same new name while Alice's clone hangs: refused, not joined.
        taken = await rpc_error(service.stub.IndexRepository(request, metadata=BOB, timeout=10))
        assert taken.code() == grpc.StatusCode.PERMISSION_DENIED
        assert taken.details() == "no repository example.com/alice/x that you may write to"
        hidden = await rpc_error(
            service.stub.GetJob(pb.GetJobRequest(job_id=mine.job.id), metadata=BOB, timeout=5)
        )
        assert hidden.code() == grpc.StatusCode.NOT_FOUND
        # Alice follows her own job although the repository does not exist (yet, or ever).
        failed = await service.job(mine.job.id, ALICE, timeout_s=60)
        assert failed.state == pb.JOB_STATE_FAILED
        assert "did not finish within 4s" in failed.error
        listed = await service.stub.ListRepositories(
            pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5
        )
        assert not listed.repositories

"""Where a repository's source may point, through the real retrieval gRPC service: a key
that is not an admin cannot make the server fetch from its own network (loopback, names
that resolve there, the cloud metadata address, userinfo and numeric tricks), an admin can
under the default RETRIEVAL_PRIVATE_SOURCES=admin and cannot under `none`, an allow-list
refuses every other host, a queued job is checked again under the policy of the process
that runs it, freshness lookups obey the policy, and a job's clone is pinned to the
addresses that were checked. A `git daemon` on 127.0.0.1 stands for an internal git server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

import retrieval.indexing.git as git_runner
from cograph.retrieval.v1 import retrieval_pb2 as pb
from retrieval.indexing import source_policy
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.retrieval import ADMIN, ALICE, serving

pytestmark = pytest.mark.asyncio(loop_scope="session")

Metadata = tuple[tuple[str, str], ...]
Stub = Any  # retrieval_pb2_grpc.RetrievalServiceAsyncStub
SLUG = "example.com/acme/internal"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Daemon:
    port: int

    def url(self, host: str = "127.0.0.1") -> str:
        return f"git://{host}:{self.port}/origin"


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[Daemon]:
    """`git daemon` on 127.0.0.1 serving one repository, `origin`."""
    base = tmp_path / "served"
    origin = base / "origin"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    write(origin, "billing/retry.py", "def retry_charge():\n    return 1\n")
    commit_all(origin, "first", JAN)
    port = _free_port()
    process = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "git daemon did not start"
                time.sleep(0.05)
        yield Daemon(port)
    finally:
        process.terminate()
        process.wait(timeout=10)


async def rpc_error(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def finished(stub: Stub, job_id: str, timeout_s: float = 120) -> pb.Job:
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            return reply.job
        assert time.monotonic() < deadline, reply.job
        await asyncio.sleep(0.1)


async def index(stub: Stub, source: str, metadata: Metadata = ADMIN, **fields: Any) -> pb.Job:
    request = pb.IndexRepositoryRequest(source=source, slug=fields.pop("slug", SLUG), **fields)
    started = await stub.IndexRepository(request, metadata=metadata, timeout=10)
    return await finished(stub, started.job.id)


async def repository(stub: Stub, slug: str = SLUG) -> pb.Repository:
    reply = await stub.GetRepository(pb.GetRepositoryRequest(slug=slug), metadata=ADMIN, timeout=10)
    return reply.repository


@contextlib.asynccontextmanager
async def retrieval(
    db_url: str, data_dir: Path, embedder_address: str, **env: str
) -> AsyncIterator[Stub]:
    async with serving(db_url, data_dir, embedder_address, RETRIEVAL_HEAD_CACHE_S="0", **env) as (
        _,
        stub,
    ):
        yield stub


def hostile_sources(daemon: Daemon) -> list[tuple[str, grpc.StatusCode]]:
    denied, invalid = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT
    return [
        (daemon.url(), denied),
        (daemon.url("localhost"), denied),
        ("https://127.0.0.1/acme/internal.git", denied),
        ("https://localhost/acme/internal.git", denied),
        ("https://LOCALHOST/acme/internal.git", denied),
        ("https://169.254.169.254/latest/meta-data", denied),
        ("https://github.com@127.0.0.1/acme/internal.git", denied),
        ("https://10.0.0.1/acme/internal.git", denied),
        ("https://100.64.0.1/acme/internal.git", denied),
        ("https://0.0.0.0/acme/internal.git", denied),
        ("https://2130706433/acme/internal.git", invalid),
        ("https://0x7f.1/acme/internal.git", invalid),
        ("https://0177.0.0.1/acme/internal.git", invalid),
        ("https://127.1/acme/internal.git", invalid),
        ("https://[::1]/acme/internal.git", invalid),
        ("https://[::ffff:127.0.0.1]/acme/internal.git", invalid),
        ("https://localhost./acme/internal.git", invalid),
        ("https://a@github.com@127.0.0.1/acme/internal.git", invalid),
    ]


async def test_a_writer_cannot_point_a_repository_at_the_servers_network(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, git_daemon: Daemon
) -> None:
    async with retrieval(
        fresh_db_url, tmp_path / "data", embedder_address, RETRIEVAL_CREATE_SOURCES="any"
    ) as stub:
        # An admin indexes from the internal git server (the default lets admins) ...
        job = await index(stub, git_daemon.url(), grant_principal_ids=["alice"])
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
        await stub.GrantAccess(
            pb.GrantAccessRequest(principal_id="alice", repository=SLUG, role=pb.ACCESS_ROLE_WRITE),
            metadata=ADMIN,
            timeout=10,
        )
        before = await repository(stub)
        assert before.source == git_daemon.url()
        # ... and Alice, who may write it, can point it nowhere on the server's network.
        for source, code in hostile_sources(git_daemon):
            error = await rpc_error(
                stub.IndexRepository(
                    pb.IndexRepositoryRequest(source=source, slug=SLUG), metadata=ALICE, timeout=10
                )
            )
            assert error.code() == code, (source, error.details())
            assert "source" in (error.details() or "") or "host" in (error.details() or "")
        # Nor create a repository of her own there (RETRIEVAL_CREATE_SOURCES=any).
        error = await rpc_error(
            stub.IndexRepository(
                pb.IndexRepositoryRequest(source="https://localhost/x/y", slug="example.com/a/b"),
                metadata=ALICE,
                timeout=10,
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "only an admin key" in (error.details() or "")
        after = await repository(stub)
        assert (after.source, after.commit) == (before.source, before.commit)
        listed = await stub.ListRepositories(
            pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=5
        )
        assert [r.slug for r in listed.repositories] == [SLUG]
        # Freshness is looked up on no key's authority: not for an internal host.
        assert after.freshness == pb.FRESHNESS_UNKNOWN
        assert "not looked up" in after.freshness_detail, after.freshness_detail


async def test_private_sources_none_refuses_admins_and_any_lets_everyone(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, git_daemon: Daemon
) -> None:
    async with retrieval(
        fresh_db_url, tmp_path / "none", embedder_address, RETRIEVAL_PRIVATE_SOURCES="none"
    ) as stub:
        for source in (git_daemon.url(), "https://localhost/acme/internal.git"):
            error = await rpc_error(
                stub.IndexRepository(
                    pb.IndexRepositoryRequest(source=source, slug=SLUG), metadata=ADMIN, timeout=10
                )
            )
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, source
            assert "RETRIEVAL_PRIVATE_SOURCES=none" in (error.details() or "") or (
                "RETRIEVAL_SOURCE_HOSTS" in (error.details() or "")
            )
    async with retrieval(
        fresh_db_url,
        tmp_path / "any",
        embedder_address,
        RETRIEVAL_PRIVATE_SOURCES="any",
        RETRIEVAL_CREATE_SOURCES="any",
    ) as stub:
        job = await index(stub, git_daemon.url(), ALICE)
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
        repo = await repository(stub)
        assert repo.freshness == pb.FRESHNESS_CURRENT, repo.freshness_detail


async def test_an_allow_list_refuses_every_other_host(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, git_daemon: Daemon
) -> None:
    async with retrieval(
        fresh_db_url,
        tmp_path / "data",
        embedder_address,
        RETRIEVAL_SOURCE_HOSTS=f"127.0.0.1:{git_daemon.port}, *.example.com",
        RETRIEVAL_PRIVATE_SOURCES="any",
        RETRIEVAL_CREATE_SOURCES="any",
    ) as stub:
        for metadata in (ADMIN, ALICE):
            for source in (
                "https://github.com/acme/billing.git",
                "https://example.com/acme/billing.git",  # *.example.com is below it only
                "https://example.com.evil.net/acme/billing.git",
                "https://git.example.com.evil.net/acme/billing.git",
                git_daemon.url("localhost"),  # the same server, but not the listed host
                f"git://127.0.0.1:{git_daemon.port + 1}/origin",  # another port
                "https://git.example.com@127.0.0.1/acme/billing.git",
            ):
                error = await rpc_error(
                    stub.IndexRepository(
                        pb.IndexRepositoryRequest(source=source, slug="example.com/a/b"),
                        metadata=metadata,
                        timeout=10,
                    )
                )
                assert error.code() == grpc.StatusCode.PERMISSION_DENIED, source
                assert "RETRIEVAL_SOURCE_HOSTS" in (error.details() or ""), error.details()
        # The listed internal server: any key may, since RETRIEVAL_PRIVATE_SOURCES=any.
        job = await index(stub, git_daemon.url(), ALICE)
        assert job.state == pb.JOB_STATE_SUCCEEDED, job.error


async def test_a_queued_job_is_checked_again_when_it_starts(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, git_daemon: Daemon
) -> None:
    """A job accepted under one policy runs under the policy of the process that claims it:
    Alice's job, queued on a server that let any key name internal hosts, fails on one
    that does not, before git is started."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        async with retrieval(
            fresh_db_url,
            tmp_path / "data",
            embedder_address,
            RETRIEVAL_PRIVATE_SOURCES="any",
            RETRIEVAL_CREATE_SOURCES="any",
            RETRIEVAL_MAX_CONCURRENT_JOBS="1",
            RETRIEVAL_GIT_TIMEOUT_S="3",
        ) as stub:
            # The only worker is busy with a source that never answers ...
            busy = await stub.IndexRepository(
                pb.IndexRepositoryRequest(
                    source=f"git://127.0.0.1:{silent.getsockname()[1]}/x", slug="example.com/b/x"
                ),
                metadata=ADMIN,
                timeout=10,
            )
            deadline = time.monotonic() + 30
            while True:
                reply = await stub.GetJob(
                    pb.GetJobRequest(job_id=busy.job.id), metadata=ADMIN, timeout=5
                )
                if reply.job.state == pb.JOB_STATE_RUNNING:
                    break
                assert time.monotonic() < deadline, reply.job
                await asyncio.sleep(0.05)
            # ... so Alice's job, accepted here, waits in the queue.
            queued = await stub.IndexRepository(
                pb.IndexRepositoryRequest(source=git_daemon.url(), slug=SLUG),
                metadata=ALICE,
                timeout=10,
            )
        # The service that takes the queue up runs under the default policy.
        async with retrieval(
            fresh_db_url,
            tmp_path / "data",
            embedder_address,
            RETRIEVAL_CREATE_SOURCES="any",
            RETRIEVAL_GIT_TIMEOUT_S="3",
        ) as stub:
            job = await finished(stub, queued.job.id)
            assert job.state == pb.JOB_STATE_FAILED
            assert "only an admin key" in job.error, job.error
            missing = await rpc_error(
                stub.GetRepository(pb.GetRepositoryRequest(slug=SLUG), metadata=ADMIN, timeout=10)
            )
            assert missing.code() == grpc.StatusCode.NOT_FOUND
            await finished(stub, busy.job.id, timeout_s=60)
    finally:
        silent.close()


async def test_a_jobs_clone_is_pinned_to_the_checked_addresses(
    fresh_db_url: str, embedder_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name the (faked) resolver answers with a public address passes the check, and the
    job's clone runs with that address pinned, without a proxy and without redirects, so
    git cannot look the name up again and get another answer. When the name's answer
    changes between the request and the job's start, the job is refused before git runs."""
    answers: list[str] = []

    async def resolver(host: str, port: int) -> Sequence[str]:
        if host != "git.pinned.test" or not answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [answers.pop(0)]

    commands: list[list[str]] = []
    build = git_runner.git_command

    def recording(
        args: Sequence[str], cwd: Path | None = None, config: Sequence[str] = ()
    ) -> list[str]:
        command = build(args, cwd, config)
        commands.append(command)
        return command

    monkeypatch.setattr(source_policy, "system_resolver", resolver)
    monkeypatch.setattr(git_runner, "git_command", recording)
    source = "https://git.pinned.test/acme/billing.git"
    async with retrieval(
        fresh_db_url,
        tmp_path / "data",
        embedder_address,
        RETRIEVAL_CREATE_SOURCES="any",
        RETRIEVAL_GIT_TIMEOUT_S="5",
    ) as stub:
        answers[:] = ["8.8.8.8", "8.8.8.8"]  # the request's check, the job's
        job = await index(stub, source, ALICE)
        # No network here: the clone fails, but it was a clone of the pinned address.
        assert job.state == pb.JOB_STATE_FAILED
        assert "git clone" in job.error, job.error
        assert not answers
        clones = [c for c in commands if "clone" in c]
        assert len(clones) == 1, commands
        assert "http.curloptResolve=git.pinned.test:443:8.8.8.8" in clones[0]
        assert "http.proxy=" in clones[0]
        assert "http.followRedirects=false" in clones[0]

        commands.clear()
        answers[:] = ["8.8.8.8", "127.0.0.1"]  # rebound after the request was accepted
        job = await index(stub, source, ALICE)
        assert job.state == pb.JOB_STATE_FAILED
        assert "only an admin key" in job.error, job.error
        assert not any("clone" in c or "fetch" in c for c in commands), commands

"""Private repositories through registered credentials, and sources that show no secret,
through the real services: a git server over https on 127.0.0.1 (`git http-backend` behind
Basic auth) refuses a clone without the token and serves it once an operator registers the
token (`cograph credentials add`, no restart); the token then appears in no clone file, job
row, repository row, listing or log. A source URL holding a password is refused over gRPC
and REST without being quoted. Keys that are not admins see sources (and freshness
details) without userinfo or server paths over REST and MCP, even for a row an older
release stored with a password; admins see no secret either."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_cli.main import main as cograph
from tests.integration.support.git_http import GitHttpServer, git_https_server
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.mcp_client import call, http_client
from tests.integration.support.retrieval import ADMIN, ALICE, serving
from tests.integration.support.stacks import gateway_stack, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOKEN = "tok-5f2a9c1e-private-repository-secret"
SLUG = "git.example.com/acme/private"


def _served(tmp_path: Path) -> Path:
    """The directory the https server serves, holding the private repository acme/private."""
    root = tmp_path / "served"
    origin = root / "acme" / "private"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    write(origin, "billing/retry.py", "def retry_charge(charge):\n    return charge\n")
    commit_all(origin, "first", JAN)
    return root


def _register(directory: Path, server: GitHttpServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token.txt"
    token_file.write_text(TOKEN + "\n")
    prefix = f"https://127.0.0.1:{server.port}/acme/"
    added = cograph(
        ["credentials", "--dir", str(directory), "add", "private-git", prefix,
         "--username", "deploy", "--token-file", str(token_file)]
    )  # fmt: skip
    assert added == 0
    token_file.unlink()


async def _finished(stub: Any, job_id: str, timeout_s: float = 120) -> pb.Job:
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            return reply.job
        assert time.monotonic() < deadline, reply.job
        await asyncio.sleep(0.1)


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and needle in p.read_bytes()
    ]


async def test_a_private_https_repository_is_indexed_with_a_registered_token(
    fresh_db_url: str,
    embedder_address: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    credentials = tmp_path / "credentials"
    data = tmp_path / "data"
    with git_https_server(_served(tmp_path), tmp_path / "tls", "deploy", TOKEN) as server:
        monkeypatch.setenv("GIT_SSL_CAINFO", str(server.ca_file))
        async with serving(
            fresh_db_url,
            data,
            embedder_address,
            RETRIEVAL_CREDENTIALS_DIR=str(credentials),
            # Freshness lookups reach 127.0.0.1 too, with the credential.
            RETRIEVAL_PRIVATE_SOURCES="any",
            RETRIEVAL_HEAD_CACHE_S="0",
        ) as (_, stub):
            url = server.url("acme/private")
            # A password in the URL is refused, and not quoted back.
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.IndexRepository(
                    pb.IndexRepositoryRequest(
                        source=server.url("acme/private", user=f"deploy:{TOKEN}"), slug=SLUG
                    ),
                    metadata=ADMIN,
                    timeout=10,
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            details = caught.value.details() or ""
            assert TOKEN not in details and "cograph credentials add" in details

            # No credential registered: the server answers 401 and the clone fails.
            request = pb.IndexRepositoryRequest(source=url, slug=SLUG, public=True)
            started = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
            failed = await _finished(stub, started.job.id)
            assert failed.state == pb.JOB_STATE_FAILED
            assert "could not read Username" in failed.error, failed.error
            assert server.requests and not any(ok for *_, ok in server.requests)

            # Registered (no restart): the clone succeeds with the token, sent as Basic auth.
            _register(credentials, server, tmp_path)
            started = await stub.IndexRepository(request, metadata=ADMIN, timeout=10)
            job = await _finished(stub, started.job.id)
            assert job.state == pb.JOB_STATE_SUCCEEDED, job.error
            basic = "Basic " + base64.b64encode(f"deploy:{TOKEN}".encode()).decode()
            assert basic in server.authorizations

            # Freshness reads the head with the same credential.
            for metadata in (ADMIN, ALICE):
                repo = (
                    await stub.GetRepository(
                        pb.GetRepositoryRequest(slug=SLUG), metadata=metadata, timeout=10
                    )
                ).repository
                assert repo.source == url and repo.freshness == pb.FRESHNESS_CURRENT, repo

            # The token is nowhere but the credentials directory.
            clone = data / "repos" / SLUG
            config = (clone / ".git" / "config").read_text()
            assert f"url = {url}\n" in config and TOKEN not in config
            assert _files_holding(data, TOKEN.encode()) == []
            assert (data / "repos").stat().st_mode & 0o777 == 0o700
            conn = await asyncpg.connect(fresh_db_url)
            try:
                jobs = await conn.fetch("SELECT row_to_json(j)::text AS row FROM index_jobs j")
                repos = await conn.fetch("SELECT row_to_json(r)::text AS row FROM repositories r")
            finally:
                await conn.close()
            assert len(jobs) == 2 and len(repos) == 1
            assert not [r["row"] for r in [*jobs, *repos] if TOKEN in r["row"]]
            listed = await stub.ListRepositories(
                pb.ListRepositoriesRequest(), metadata=ADMIN, timeout=10
            )
            assert TOKEN not in str(listed)
    logged = caplog.text + "".join(repr(vars(r)) for r in caplog.records)
    assert caplog.records and TOKEN not in logged


async def test_read_keys_see_sources_without_userinfo_or_server_paths(
    pg_server_url: str, embedder_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with git_https_server(_served(tmp_path), tmp_path / "tls", "deploy", TOKEN) as server:
        monkeypatch.setenv("GIT_SSL_CAINFO", str(server.ca_file))
        async with gateway_stack(
            pg_server_url, embedder_address, tmp_path / "gw", services=("retrieval",)
        ) as stack:
            # The default credentials directory: $COGRAPH_DATA_DIR/credentials.
            _register(stack.data_dir / "retrieval" / "credentials", server, tmp_path)
            local_slug = "example.com/acme/local"
            local = tmp_path / "src"
            local.mkdir()
            git(local, "init", "-q", "-b", "main")
            write(local, "ledger.py", "def post_entry(entry):\n    return entry\n")
            commit_all(local, "first", JAN)
            async with (
                stack.client(stack.admin_key) as admin,
                stack.client(await stack.key("alice")) as alice,
            ):
                # REST: a password in the URL is a 400 that does not quote it.
                refused = await admin.post(
                    "/api/repositories",
                    json={
                        "source": server.url("acme/private", user=f"deploy:{TOKEN}"),
                        "slug": SLUG,
                    },
                )
                assert refused.status_code == 400, refused.text
                assert refused.json()["error"] == "invalid_argument"
                assert TOKEN not in refused.text and "credential" in refused.text

                # A plain user name is allowed (an admin may name 127.0.0.1).
                with_user = server.url("acme/private", user="deploy")
                for source, slug in ((with_user, SLUG), (str(local), local_slug)):
                    started = await admin.post(
                        "/api/repositories",
                        json={"source": source, "slug": slug, "grant_principal_ids": ["alice"]},
                    )
                    assert started.status_code == 202, started.text
                    done = await wait_job(admin, started.json()["job"]["id"])
                    assert done["state"] == "succeeded", done
                # A row as an older release stored it, and a local source that is no git
                # repository any more: its re-index fails with an error quoting its path.
                conn = await asyncpg.connect(stack.database_url)
                try:
                    await conn.execute(
                        "UPDATE repositories SET source = $1 WHERE slug = $2",
                        server.url("acme/private", user=f"deploy:{TOKEN}"),
                        SLUG,
                    )
                finally:
                    await conn.close()
                shutil.rmtree(local / ".git")
                started = await admin.post(
                    "/api/repositories",
                    json={"source": str(local), "slug": local_slug, "branch": "main"},
                )
                assert started.status_code == 202, started.text
                job_id = started.json()["job"]["id"]
                failed_job = await wait_job(admin, job_id)
                assert failed_job["state"] == "failed"
                assert f"{local} is not a git repository" in failed_job["error"]
                seen = (await alice.get(f"/api/jobs/{job_id}")).json()
                assert seen["error"].startswith("local is not a git repository"), seen
                assert str(tmp_path) not in seen["error"]

                shown = server.url("acme/private")
                alice_key = await stack.key("alice")
                for client, key in ((alice, alice_key), (admin, stack.admin_key)):
                    is_admin = key == stack.admin_key
                    listed = (await client.get("/api/repositories")).json()["repositories"]
                    one = (await client.get(f"/api/repositories/{SLUG}")).json()
                    other = (await client.get(f"/api/repositories/{local_slug}")).json()
                    async with http_client(stack, key) as mcp:
                        failed, status = await call(mcp, "cograph_status", {})
                    assert not failed, status
                    bodies = json.dumps([listed, one, other, status["repositories"]])
                    assert TOKEN not in bodies
                    sources = {r["slug"]: r["source"] for r in [*listed, *status["repositories"]]}
                    if is_admin:
                        assert sources == {SLUG: with_user, local_slug: str(local)}
                        assert one["source"] == with_user
                    else:
                        assert sources == {SLUG: shown, local_slug: "local"}
                        assert (one["source"], other["source"]) == (shown, "local")
                        assert "deploy@" not in bodies and str(tmp_path) not in bodies
                        assert other["freshness"] == "unknown" and other["freshness_detail"]
                    # Freshness is looked up on no key's authority: not for 127.0.0.1, and
                    # the refusal quotes the source as the viewer may see it.
                    assert one["freshness"] == "unknown"
                    assert "not looked up" in one["freshness_detail"]
                    assert "deploy" not in one["freshness_detail"]

                # A writer re-indexing through MCP sends back the source it was shown; it
                # stands for the stored one, so the refusal is about that source (a server
                # path is an admin's), not about the text `local`.
                await admin.post(
                    "/api/access/grant",
                    json={"principal_id": "alice", "repository": local_slug, "role": "write"},
                )
                async with http_client(stack, alice_key) as mcp:
                    failed, reply = await call(mcp, "cograph_index", {"repo": local_slug})
                assert failed and reply["error"] == "permission_denied", reply
                assert "admin key" in reply["detail"] and str(tmp_path) not in reply["detail"]

"""Push webhooks end to end (gateway.routes_hooks, retrieval SyncSource, indexing/push_sync):
a commit pushed to an indexed repository becomes searchable when GitHub's or GitLab's
delivery arrives, signed as the vendor signs it, with the sync's polling off and nobody
calling index; and what a caller without the secret, or with a delivery meant for
something else, gets instead: 401, 400, 404, 413 or 429, and nothing queued."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.push_hooks import WEBHOOK_PRINCIPAL
from retrieval.indexing.jobs import JobManager
from retrieval.indexing.push_sync import PushSync
from tests.integration.support.git_repos import MAR, commit_all, git, make_repo, write
from tests.integration.support.retrieval import ADMIN, ALICE, serving
from tests.integration.support.stacks import Stack, gateway_stack, wait_job, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")

GITHUB_SECRET = "github-webhook-secret-of-at-least-32-bytes-0001"
GITLAB_SECRET = "gitlab-webhook-secret-token-of-at-least-32-bytes-02"
SLUG = "example.com/team/demo"
HOOKS = {
    "GATEWAY_GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
    "GATEWAY_GITLAB_WEBHOOK_SECRET": GITLAB_SECRET,
}
NO_POLLING = {"RETRIEVAL_SYNC_INTERVAL_S": "0"}
WEBHOOK = (("x-cograph-principal", WEBHOOK_PRINCIPAL), ("x-cograph-admin", "0"))


def github_push(clone_url: str, after: str, ref: str = "refs/heads/main") -> dict[str, Any]:
    """A push event as GitHub sends it (the fields the hook reads, and some it does not)."""
    return {
        "ref": ref,
        "before": "1" * 40,
        "after": after,
        "created": False,
        "deleted": False,
        "forced": False,
        "repository": {
            "id": 1,
            "name": "demo",
            "full_name": "team/demo",
            "private": True,
            "clone_url": clone_url,
            "ssh_url": "git@github.com:team/demo.git",
            "html_url": "https://github.com/team/demo",
        },
        "pusher": {"name": "someone"},
        "commits": [{"id": after, "message": "add the ledger", "added": ["pkg/ledger.py"]}],
        "head_commit": {"id": after},
    }


def gitlab_push(http_url: str, after: str) -> dict[str, Any]:
    """A push event as GitLab sends it."""
    return {
        "object_kind": "push",
        "event_name": "push",
        "before": "1" * 40,
        "after": after,
        "ref": "refs/heads/main",
        "checkout_sha": after,
        "project": {
            "id": 15,
            "path_with_namespace": "team/demo",
            "git_http_url": http_url,
            "git_ssh_url": "git@gitlab.example.com:team/demo.git",
            "web_url": "https://gitlab.example.com/team/demo",
        },
        "commits": [{"id": after}],
        "total_commits_count": 1,
    }


def github_headers(
    body: bytes, *, secret: str = GITHUB_SECRET, event: str = "push"
) -> dict[str, str]:
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "42",
        "X-Hub-Signature-256": f"sha256={signature}",
        "User-Agent": "GitHub-Hookshot/test",
    }


def gitlab_headers(*, token: str = GITLAB_SECRET, event: str = "Push Hook") -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-Gitlab-Event": event,
        "X-Gitlab-Event-UUID": str(uuid.uuid4()),
        "X-Gitlab-Token": token,
        "User-Agent": "GitLab/17.0.0",
    }


def dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def _hook_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "gateway.routes_hooks"]


async def _searchable(client: httpx.AsyncClient, query: str, path: str) -> None:
    async def found() -> bool:
        reply = await client.post("/api/search", json={"query": query, "repo": SLUG})
        assert reply.status_code == 200, reply.text
        return any(r["location"].startswith(path + ":") for r in reply.json()["results"])

    await wait_until(found, 180, f"{path} searchable")


async def _index(stack: Stack, source: str) -> None:
    async with stack.client(stack.admin_key) as admin:
        created = await admin.post("/api/repositories", json={"source": source, "slug": SLUG})
        assert created.status_code == 202, created.text
        done = await wait_job(admin, created.json()["job"]["id"])
        assert done["state"] == "succeeded", done


async def _webhook_jobs(stack: Stack) -> int:
    connection = await asyncpg.connect(stack.database_url)
    try:
        count = await connection.fetchval(
            "SELECT count(*) FROM index_jobs WHERE $1 = ANY(requested_by)", WEBHOOK_PRINCIPAL
        )
    finally:
        await connection.close()
    return int(count)


async def test_a_signed_push_makes_the_pushed_commit_searchable_without_anyone_indexing(
    pg_server_url: str, embedder_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.routes_hooks")
    # The indexed repository is a bare one the commits are pushed to, as on a git host.
    work = make_repo(tmp_path / "work")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(origin))
    git(work, "remote", "add", "origin", str(origin))
    origin_url = origin.resolve().as_uri()
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path / "stack",
        services=("retrieval",),
        service_env=NO_POLLING,
        **HOOKS,
    ) as stack:
        assert stack.retrieval is not None and stack.retrieval.sync is None
        await _index(stack, origin_url)

        # GitHub: a commit pushed, then the delivery GitHub makes for it.
        write(work, "pkg/ledger.py", "def reconcile_ledger_entries(rows):\n    return rows\n")
        commit_all(work, "add the ledger", MAR)
        git(work, "push", "-q", "origin", "main")
        head = git(origin, "rev-parse", "main")
        body = dumps(github_push(origin_url, head))
        async with stack.client() as hook, stack.client(stack.admin_key) as admin:
            # GitHub says hello first when the webhook is created.
            ping = dumps({"zen": "Keep it logically awesome.", "hook_id": 42})
            pinged = await hook.post(
                "/api/hooks/github", content=ping, headers=github_headers(ping, event="ping")
            )
            assert pinged.status_code == 200, pinged.text
            assert pinged.json()["queued"] == []

            before = await admin.post(
                "/api/search", json={"query": "reconcile ledger entries", "repo": SLUG}
            )
            assert all(
                not r["location"].startswith("pkg/ledger.py") for r in before.json()["results"]
            ), "pushed, not yet indexed"
            headers = github_headers(body)
            delivered = await hook.post("/api/hooks/github", content=body, headers=headers)
            assert delivered.status_code == 202, delivered.text
            assert delivered.json() == {"queued": [SLUG], "up_to_date": []}
            # Logged with the delivery id and the request id, without the signature.
            (logged,) = [
                r
                for r in _hook_logs(caplog)
                if getattr(r, "delivery", None) == headers["X-GitHub-Delivery"]
            ]
            assert logged.request_id == delivered.headers["x-request-id"]  # type: ignore[attr-defined]
            assert logged.queued == [SLUG]  # type: ignore[attr-defined]
            assert headers["X-Hub-Signature-256"][7:] not in str(logged.__dict__)
            await _searchable(admin, "reconcile ledger entries", "pkg/ledger.py")

            async def synced() -> bool:
                shown = (await admin.get(f"/api/repositories/{SLUG}")).json()
                return bool(shown["commit"] == head and shown["last_synced_at"])

            await wait_until(synced, 60, "the pushed commit indexed and noted as synced")

            # The same delivery again (GitHub's "Redeliver", or a replay): already indexed.
            again = await hook.post("/api/hooks/github", content=body, headers=github_headers(body))
            assert again.status_code == 200, again.text
            assert again.json() == {"queued": [], "up_to_date": [SLUG]}

            # GitLab: the next commit, delivered with the secret token; its project URL is
            # the server path the repository was indexed from, in another form.
            write(work, "pkg/refunds.py", "def issue_partial_refund(amount):\n    return amount\n")
            commit_all(work, "partial refunds", MAR)
            git(work, "push", "-q", "origin", "main")
            head = git(origin, "rev-parse", "main")
            body = dumps(gitlab_push(str(origin.resolve()) + "/", head))
            delivered = await hook.post("/api/hooks/gitlab", content=body, headers=gitlab_headers())
            assert delivered.status_code == 202, delivered.text
            assert delivered.json() == {"queued": [SLUG], "up_to_date": []}
            await _searchable(admin, "issue partial refund", "pkg/refunds.py")

            # Pushes the hook has nothing to do for: a tag, a deleted branch, another branch.
            for ref, after, why in (
                ("refs/tags/v1", head, "not a branch"),
                ("refs/heads/main", "0" * 40, "deleted"),
            ):
                body = dumps(github_push(origin_url, after, ref))
                answer = await hook.post(
                    "/api/hooks/github", content=body, headers=github_headers(body)
                )
                assert answer.status_code == 200 and why in answer.json()["ignored"], answer.text
            body = dumps(github_push(origin_url, "2" * 40, "refs/heads/other"))
            answer = await hook.post(
                "/api/hooks/github", content=body, headers=github_headers(body)
            )
            assert answer.status_code == 200 and answer.json()["queued"] == [], answer.text
        # One run per push: two deliveries queued, the others queued nothing.
        assert await _webhook_jobs(stack) == 2


async def test_deliveries_without_the_secret_queue_nothing_and_tell_nothing(
    pg_server_url: str, embedder_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.routes_hooks")
    repo = make_repo(tmp_path / "demo")
    head = git(repo, "rev-parse", "HEAD")
    source = repo.resolve().as_uri()
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path / "stack",
        services=("retrieval",),
        service_env=NO_POLLING,
        GATEWAY_GITHUB_WEBHOOK_SECRET=GITHUB_SECRET,  # GitLab's is not set
        GATEWAY_MAX_BODY_BYTES="65536",
        GATEWAY_QUOTAS="true",
        GATEWAY_QUOTA_HOOKS_BURST="40",
        GATEWAY_QUOTA_HOOKS_RATE="0.001",
    ) as stack:
        await _index(stack, source)
        # Moved on since it was indexed: a delivery that got through would queue a run.
        write(repo, "pkg/ledger.py", "def reconcile_ledger_entries(rows):\n    return rows\n")
        commit_all(repo, "add the ledger", MAR)
        moved = git(repo, "rev-parse", "HEAD")
        assert moved != head
        indexed = dumps(github_push(source, moved))
        unknown = dumps(github_push("https://github.com/team/never-indexed.git", moved))
        async with stack.client() as hook, stack.client(stack.admin_key) as admin:

            async def post(body: bytes, headers: dict[str, str]) -> httpx.Response:
                return await hook.post("/api/hooks/github", content=body, headers=headers)

            # A wrong signature (another secret), a missing one, one for another body.
            wrong = github_headers(indexed, secret=GITHUB_SECRET + "x")
            missing = {k: v for k, v in github_headers(indexed).items() if "Signature" not in k}
            other_body = github_headers(indexed + b" ")
            answers = [await post(indexed, h) for h in (wrong, missing, other_body)]
            for answer in answers:
                assert answer.status_code == 401, answer.text
                assert answer.json()["error"] == "unauthenticated"
                assert SLUG not in answer.text and GITHUB_SECRET not in answer.text
            assert "missing X-Hub-Signature-256" in answers[1].json()["detail"]
            assert "not the HMAC-SHA256" in answers[0].json()["detail"]
            refused = [r for r in _hook_logs(caplog) if r.getMessage() == "push webhook refused"]
            assert [r.delivery for r in refused] == [  # type: ignore[attr-defined]
                h["X-GitHub-Delivery"] for h in (wrong, missing, other_body)
            ]
            for record in refused:
                shown = str(record.__dict__)
                assert GITHUB_SECRET not in shown
                for given in (wrong, other_body):
                    assert given["X-Hub-Signature-256"][7:] not in shown
            # Whether the payload names an indexed repository or not, the refusal is the same.
            unknown_wrong = await post(unknown, github_headers(unknown, secret=GITHUB_SECRET + "x"))
            assert (unknown_wrong.status_code, unknown_wrong.json()) == (
                answers[0].status_code,
                answers[0].json(),
            )
            # An API key is not what authenticates a delivery.
            keyed = await admin.post("/api/hooks/github", content=indexed, headers=missing)
            assert keyed.status_code == 401, keyed.text

            # A validly signed delivery of another event, replayed as a push: its payload is
            # not a push's.
            issues = dumps(
                {"action": "opened", "issue": {"number": 1}, "repository": {"clone_url": source}}
            )
            as_issues = await post(issues, github_headers(issues, event="issues"))
            assert (
                as_issues.status_code == 200 and "not a push event" in as_issues.json()["ignored"]
            )
            as_push = await post(issues, github_headers(issues))
            assert as_push.status_code == 400 and "ref: missing" in as_push.json()["detail"]
            no_event = {k: v for k, v in github_headers(indexed).items() if k != "X-GitHub-Event"}
            answer = await post(indexed, no_event)
            assert answer.status_code == 400 and "X-GitHub-Event" in answer.json()["detail"]
            for bad in (b"not json", b"[]", dumps({"ref": "refs/heads/main"})):
                answer = await post(bad, github_headers(bad))
                assert answer.status_code == 400, answer.text

            # Bodies over GATEWAY_MAX_BODY_BYTES, declared and chunked: 413 before anything.
            huge = b'{"pad": "' + b"x" * 70_000 + b'"}'
            answer = await post(huge, github_headers(huge))
            assert answer.status_code == 413, answer.text

            async def chunks() -> Any:
                for _ in range(20):
                    yield b"x" * 8192

            chunked = await hook.post(
                "/api/hooks/github", content=chunks(), headers=github_headers(b"")
            )
            assert chunked.status_code == 413, chunked.text

            # A URL that contains the indexed one, or that it contains, names another repository.
            for url in (source + "-old", source + "/pkg", source.rsplit("/", 1)[0]):
                body = dumps(github_push(url, moved))
                answer = await post(body, github_headers(body))
                assert answer.status_code == 200, answer.text
                assert answer.json() == {"queued": [], "up_to_date": []}

            # GitLab's hook has no secret token configured: it is not there.
            disabled = await hook.post(
                "/api/hooks/gitlab",
                content=dumps(gitlab_push(source, moved)),
                headers=gitlab_headers(),
            )
            absent = await hook.post("/api/hooks/bitbucket", content=b"{}")
            assert disabled.status_code == absent.status_code == 404
            assert disabled.json() == absent.json()

            assert await _webhook_jobs(stack) == 0

            # Past the vendor's allowance (40 deliveries, then one per 1,000 s): 429 with
            # Retry-After before the body is read, signed or not.
            statuses = []
            for _ in range(40):
                answer = await post(indexed, wrong)
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    break
            assert statuses[-1] == 429, statuses
            signed = await post(indexed, github_headers(indexed))
            assert signed.status_code == 429 and int(signed.headers["retry-after"]) >= 1
            assert "to this webhook" in signed.json()["detail"]
            assert await _webhook_jobs(stack) == 0
            # Keys' own allowances are their own.
            listed = await admin.get("/api/repositories")
            assert listed.status_code == 200, listed.text


async def test_only_the_webhook_identity_may_call_sync_source(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    async with serving(fresh_db_url, tmp_path / "data", embedder_address, **NO_POLLING) as (
        _app,
        stub,
    ):
        request = pb.SyncSourceRequest(urls=["github.com/acme/billing"], branch="main")
        admin_webhook = (("x-cograph-principal", WEBHOOK_PRINCIPAL), ("x-cograph-admin", "1"))
        for metadata in (ADMIN, ALICE, admin_webhook, ()):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SyncSource(request, metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, metadata
        reply = await stub.SyncSource(request, metadata=WEBHOOK, timeout=10)
        assert list(reply.queued) == [] and list(reply.up_to_date) == []
        for bad in (
            pb.SyncSourceRequest(urls=[], branch="main"),
            pb.SyncSourceRequest(urls=["https://github.com/acme/billing"], branch="main"),
            pb.SyncSourceRequest(urls=["GitHub.com/acme/billing"], branch="main"),
            pb.SyncSourceRequest(urls=[f"h.example/r{i}" for i in range(9)], branch="main"),
            pb.SyncSourceRequest(urls=["github.com/acme/billing"], branch=""),
            pb.SyncSourceRequest(urls=["github.com/acme/billing"], branch="a\nb"),
            pb.SyncSourceRequest(urls=["github.com/acme/billing"], branch="main", commit="main"),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SyncSource(bad, metadata=WEBHOOK, timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad


BILLING = "github.com/acme/billing"
INDEXED = "a" * 40
PUSHED = "b" * 40


async def _repository(pool: asyncpg.Pool, slug: str, source: str, branch: str = "main") -> None:
    await pool.execute(
        "INSERT INTO repositories (slug, branch, source, source_kind, commit_sha, indexed_at) "
        "VALUES ($1, $2, $3, 'url', $4, now())",
        slug,
        branch,
        source,
        INDEXED,
    )


async def _active(pool: asyncpg.Pool, slug: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT id, state, requested_by, request FROM index_jobs "
            "WHERE target = $1 AND state IN ('queued', 'running')",
            slug,
        )
    )


async def test_matching_joining_and_following_the_run_in_progress(
    retrieval_pool: asyncpg.Pool,
) -> None:
    jobs = JobManager(retrieval_pool)  # not started: queued jobs stay queued
    push = PushSync(retrieval_pool, jobs, follow_poll_s=0.05)
    await _repository(retrieval_pool, "github.com/acme/billing", "https://github.com/acme/billing")
    await _repository(retrieval_pool, "mirror/billing", "git@github.com:Acme/Billing.git")
    await _repository(
        retrieval_pool, "github.com/acme/billing-old", "https://github.com/acme/billing-old"
    )
    await _repository(
        retrieval_pool, "other-branch/billing", "https://github.com/acme/billing", "dev"
    )
    try:
        outcome = await push.sync([BILLING], "main", PUSHED)
        assert outcome.queued == ["github.com/acme/billing", "mirror/billing"]
        (queued,) = await _active(retrieval_pool, "github.com/acme/billing")
        assert WEBHOOK_PRINCIPAL in queued["requested_by"]
        request = json.loads(queued["request"])
        assert request["source"] == "https://github.com/acme/billing"
        assert request["branch"] == "main" and request["public_hosts_only"] is True

        # A second push joins the queued job (which fetches when it starts).
        await push.sync([BILLING], "main", "c" * 40)
        assert [r["id"] for r in await _active(retrieval_pool, "github.com/acme/billing")] == [
            queued["id"]
        ]
        # Already indexed at the pushed commit: nothing to do.
        assert (await push.sync([BILLING], "main", INDEXED)).up_to_date == [
            "github.com/acme/billing",
            "mirror/billing",
        ]
        assert (await push.sync(["github.com/acme"], "main", PUSHED)).queued == []

        # A running job may predate the push: followed, and queued again when it ends
        # without the pushed commit.
        await retrieval_pool.execute(
            "UPDATE index_jobs SET state = 'running' WHERE id = $1", queued["id"]
        )
        assert (await push.sync([BILLING], "main", PUSHED)).queued[0] == "github.com/acme/billing"
        assert "github.com/acme/billing" in push.following
        await asyncio.sleep(0.3)
        assert [r["id"] for r in await _active(retrieval_pool, "github.com/acme/billing")] == [
            queued["id"]
        ]
        await retrieval_pool.execute(
            "UPDATE index_jobs SET state = 'succeeded', finished_at = now() WHERE id = $1",
            queued["id"],
        )

        async def requeued() -> bool:
            rows = await _active(retrieval_pool, "github.com/acme/billing")
            return len(rows) == 1 and rows[0]["id"] != queued["id"]

        await wait_until(requeued, 10, "the re-index after the run in progress", every_s=0.05)
        assert "github.com/acme/billing" not in push.following

        # A run that ends having indexed the pushed commit is not repeated.
        (mirror,) = await _active(retrieval_pool, "mirror/billing")
        await retrieval_pool.execute(
            "UPDATE index_jobs SET state = 'running' WHERE id = $1", mirror["id"]
        )
        await push.sync([BILLING], "main", PUSHED)
        assert "mirror/billing" in push.following
        await retrieval_pool.execute(
            "UPDATE repositories SET commit_sha = $1 WHERE slug = 'mirror/billing'", PUSHED
        )
        await retrieval_pool.execute(
            "UPDATE index_jobs SET state = 'succeeded', finished_at = now() WHERE id = $1",
            mirror["id"],
        )

        async def released() -> bool:
            return "mirror/billing" not in push.following

        await wait_until(released, 10, "the followed run to end", every_s=0.05)
        assert await _active(retrieval_pool, "mirror/billing") == []
    finally:
        await push.stop()
        await jobs.close()

"""The REST gateway over real HTTP in front of the real commons, retrieval and router:
auth, keys, the commons flow, repositories/collections/jobs, routing, validation, metrics."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from cograph_api import limits
from gateway.keys_store import KeysStore
from svckit.logs import JsonFormatter
from tests.integration.support.contract import Contract
from tests.integration.support.stacks import (
    Stack,
    gateway_stack,
    metric_value,
    wait_job,
    wait_searchable,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path_factory.mktemp("gw"),
        GATEWAY_MAX_BODY_BYTES="200000",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def contract(stack: Stack) -> Contract:
    """Every successful answer the clients below receive is checked against its route's
    documented model (tests/integration/support/contract.py)."""
    return Contract(stack.gateway.app)


def _checked(stack: Stack, contract: Contract, key: str) -> httpx.AsyncClient:
    return stack.client(key, event_hooks={"response": [contract.hook]})


@pytest_asyncio.fixture(loop_scope="session")
async def admin(stack: Stack, contract: Contract) -> AsyncIterator[httpx.AsyncClient]:
    async with _checked(stack, contract, stack.admin_key) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def alice(stack: Stack, contract: Contract) -> AsyncIterator[httpx.AsyncClient]:
    async with _checked(stack, contract, await stack.key("alice")) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def bob(stack: Stack, contract: Contract) -> AsyncIterator[httpx.AsyncClient]:
    async with _checked(stack, contract, await stack.key("bob")) as client:
        yield client


# ---- health, metrics, openapi: public ----


async def test_probes_are_public_and_ready(stack: Stack) -> None:
    async with stack.client() as anon:
        assert (await anon.get("/healthz")).json() == {"status": "ok"}
        ready = await anon.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "ready"
        assert ready.json()["dependencies"] == {
            "retrieval": "serving",
            "router": "serving",
            "commons": "serving",
            "database": "serving",
        }
        spec = (await anon.get("/openapi.json")).json()
        assert "/v1/posts" in spec["paths"] and "/api/search" in spec["paths"]
        assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        page = await anon.get("/search")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        for docs in ("/docs", "/redoc"):
            reply = await anon.get(docs)
            assert reply.status_code == 200 and "/openapi.json" in reply.text, docs
        # The metrics are on a listener of their own, never the public port.
        assert (await anon.get("/metrics")).status_code == 401
        async with stack.client(stack.admin_key) as admin:
            assert (await admin.get("/metrics")).status_code == 404
        assert "cograph_gateway_requests_total" in await stack.scrape()


async def test_answers_are_what_the_document_declares(
    admin: httpx.AsyncClient, contract: Contract
) -> None:
    """The hook on these clients validated each answer; this says it ran on several kinds."""
    post = await admin.post("/v1/posts", json={"title": "Contract", "body": "checked"})
    assert post.status_code == 201, post.text
    for reply in (
        await admin.get(f"/v1/posts/{post.json()['id']}"),
        await admin.get("/api/repositories"),
        await admin.get("/api/collections"),
        await admin.get("/api/keys"),
        await admin.post("/api/search", json={"query": "retry a failed charge"}),
        await admin.post("/api/search", json={"query": "retry", "verbose": True}),
        await admin.post("/api/route", json={"query": "where is billing"}),
        await admin.get("/v1/moderation/log"),
        await admin.get("/healthz"),
    ):
        assert reply.status_code == 200, reply.text
    for method, route in (
        ("POST", "/v1/posts"),
        ("GET", "/v1/posts/{post_id}"),
        ("GET", "/api/keys"),
        ("POST", "/api/search"),
        ("POST", "/api/route"),
        ("GET", "/healthz"),
    ):
        assert contract.checked.get((method, route)), (method, route)
    assert contract.checked[("POST", "/api/search")] >= 2  # the compact and verbose forms


# ---- auth ----


async def test_missing_bad_and_malformed_keys_are_401(stack: Stack) -> None:
    async with stack.client() as anon:
        for headers in (
            {},
            {"Authorization": "Bearer cg_not-a-real-key"},
            {"Authorization": "Bearer"},
            {"Authorization": "Basic dXNlcjpwYXNz"},
            {"Authorization": "Bearer " + "x" * 5000},
        ):
            for method, path in (
                ("GET", "/api/repositories"),
                ("GET", "/v1/search?q=x"),
                ("POST", "/mcp"),
                ("GET", "/api/keys"),
            ):
                reply = await anon.request(method, path, headers=headers)
                assert reply.status_code == 401, (headers, path, reply.text)
                assert reply.json()["error"] == "unauthenticated"
                assert reply.headers["www-authenticate"] == "Bearer"


async def test_keys_admin_create_list_revoke(stack: Stack, admin: httpx.AsyncClient) -> None:
    created = await admin.post("/api/keys", json={"name": "ci-bot"})
    assert created.status_code == 201, created.text
    body = created.json()
    secret = body["key"]
    assert secret.startswith("cg_") and body["principal_id"] == "ci-bot"
    assert body["admin"] is False and body["revoked_at"] is None
    assert secret.startswith(body["key_prefix"])

    listed = (await admin.get("/api/keys")).json()["keys"]
    mine = next(k for k in listed if k["id"] == body["id"])
    assert "key" not in mine and mine["name"] == "ci-bot"

    async with stack.client(secret) as bot:
        assert (await bot.get("/api/repositories")).status_code == 200
        # Not an admin: key administration is refused.
        assert (await bot.get("/api/keys")).status_code == 403
        denied = await bot.post("/api/keys", json={"name": "x"})
        assert denied.status_code == 403 and denied.json()["error"] == "permission_denied"
        assert (await bot.delete(f"/api/keys/{body['id']}")).status_code == 403

        assert (await admin.delete(f"/api/keys/{body['id']}")).status_code == 204
        revoked = await bot.get("/api/repositories")
        assert revoked.status_code == 401 and revoked.json()["error"] == "unauthenticated"
    after = (await admin.get("/api/keys")).json()["keys"]
    assert next(k for k in after if k["id"] == body["id"])["revoked_at"] is not None
    assert next(k for k in after if k["principal_id"] == "admin")["last_used_at"] is not None

    assert (await admin.delete("/api/keys/not-a-uuid")).status_code == 404
    bad = await admin.post("/api/keys", json={"name": "has space"})
    assert bad.status_code == 400 and "name" in bad.json()["detail"]


async def test_key_with_a_grant_on_an_unknown_source_is_not_left_behind(
    admin: httpx.AsyncClient,
) -> None:
    reply = await admin.post(
        "/api/keys", json={"name": "granted", "grant_repositories": ["github.com/a/b"]}
    )
    assert reply.status_code == 404, reply.text
    keys = (await admin.get("/api/keys")).json()["keys"]
    assert "granted" not in [k["name"] for k in keys if not k["revoked_at"]]


# ---- the commons ----


async def test_commons_flow(alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
    created = await alice.post(
        "/v1/posts",
        json={
            "title": "Sign-up lives in auth/signup.tsx",
            "body": "Never add a registration form; extend the sign-up flow.",
            "tags": ["auth", "signup"],
        },
    )
    assert created.status_code == 201, created.text
    post = created.json()
    post_id = post["id"]
    assert post["score"] == 0 and post["comment_count"] == 0
    assert isinstance(post["contributor_no"], int) and post["tags"] == ["auth", "signup"]
    assert post["created_at"].endswith("Z")

    got = await bob.get(f"/v1/posts/{post_id}")
    assert got.status_code == 200 and got.json()["body"].startswith("Never add")

    vote = await bob.post(f"/v1/posts/{post_id}/votes", json={"direction": "up"})
    assert vote.status_code == 200, vote.text
    assert vote.json() == {"post_id": post_id, "score": 1, "direction": "up"}

    comment = await bob.post(f"/v1/posts/{post_id}/comments", json={"body": "Confirmed."})
    assert comment.status_code == 201, comment.text
    assert comment.json()["comment_count"] == 1
    comments = (await alice.get(f"/v1/posts/{post_id}/comments")).json()["comments"]
    assert [c["body"] for c in comments] == ["Confirmed."]

    await wait_searchable(alice, post_id)
    found = await bob.get("/v1/search", params={"q": "add a registration form"})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["query"] == "add a registration form"
    hit = body["results"][0]
    assert hit["id"] == post_id
    assert set(hit) == {
        "id",
        "contributor_no",
        "title",
        "body",
        "body_truncated",
        "body_chars",
        "tags",
        "score",
        "comment_count",
        "created_at",
        "author_name",
    }
    assert hit["author_name"] is None  # alice has set no display name
    assert hit["score"] == 1 and hit["comment_count"] == 1 and hit["body_truncated"] is False

    forbidden = await bob.delete(f"/v1/posts/{post_id}")
    assert forbidden.status_code == 403 and forbidden.json()["error"] == "permission_denied"
    assert (await alice.delete(f"/v1/posts/{post_id}")).status_code == 204
    gone = await alice.get(f"/v1/posts/{post_id}")
    assert gone.status_code == 404 and gone.json()["error"] == "not_found"


async def test_commons_errors(alice: httpx.AsyncClient) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    assert (await alice.get(f"/v1/posts/{missing}")).status_code == 404
    assert (
        await alice.post(f"/v1/posts/{missing}/votes", json={"direction": "up"})
    ).status_code == 404
    assert (await alice.get("/v1/posts/not-a-uuid")).status_code == 400
    cases = [
        (
            "POST",
            "/v1/posts",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
        ),
        ("POST", "/v1/posts", {"content": b"title=x", "headers": {"content-type": "text/plain"}}),
        ("POST", "/v1/posts", {"json": {"title": "t", "body": "b", "extra": 1}}),
        ("POST", "/v1/posts", {"json": {"title": "t"}}),
        ("POST", "/v1/posts", {"json": {"title": "", "body": "b"}}),
        ("POST", "/v1/posts", {"json": {"title": "t", "body": "b\u0000"}}),
        ("POST", "/v1/posts", {"json": ["a list"]}),
        ("POST", f"/v1/posts/{missing}/votes", {"json": {"direction": "sideways"}}),
        ("POST", f"/v1/posts/{missing}/votes", {"json": {"direction": 1}}),
        ("GET", "/v1/search", {}),
        ("GET", "/v1/search?q=", {}),
        ("GET", "/v1/search", {"params": {"q": "x" * 5000}}),
    ]
    for method, path, kwargs in cases:
        reply = await alice.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert reply.status_code == 400, (path, kwargs, reply.text)
        assert reply.json()["error"] == "invalid_argument" and reply.json()["detail"]
    too_big = await alice.post("/v1/posts", json={"title": "t", "body": "x" * 300_000})
    assert too_big.status_code == 413 and too_big.json()["error"] == "payload_too_large"
    wrong_method = await alice.put("/v1/posts")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"] == "method_not_allowed"
    nowhere = await alice.get("/api/nothing-here")
    assert nowhere.status_code == 404 and nowhere.json()["error"] == "not_found"


async def test_commons_listing_and_display_names(
    stack: Stack, contract: Contract, admin: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    tag = "listing-rest"
    async with _checked(stack, contract, await stack.key("lister")) as carol:
        me = await carol.get("/v1/me")
        assert me.status_code == 200 and me.json() == {"contributor_no": None, "display_name": None}
        named = await carol.put("/v1/me", json={"display_name": "  Carol <i>C</i> "})
        assert named.status_code == 200, named.text
        profile = named.json()
        assert profile["display_name"] == "Carol <i>C</i>" and profile["contributor_no"] > 0
        ids = []
        for i in range(3):
            note = {"title": f"listed {i}", "body": "b" * 2000, "tags": [tag]}
            ids.append((await carol.post("/v1/posts", json=note)).json()["id"])
        await bob.post(f"/v1/posts/{ids[0]}/votes", json={"direction": "up"})

        first = await bob.get("/v1/posts", params={"tag": tag, "limit": 2})
        assert first.status_code == 200, first.text
        page = first.json()
        assert [p["id"] for p in page["posts"]] == [ids[2], ids[1]]
        assert page["posts"][0]["author_name"] == "Carol <i>C</i>"
        assert page["posts"][0]["contributor_no"] == profile["contributor_no"]
        assert page["posts"][0]["body_truncated"] and page["posts"][0]["body_chars"] == 2000
        rest = await bob.get(
            "/v1/posts", params={"tag": tag, "limit": 2, "cursor": page["next_cursor"]}
        )
        assert [p["id"] for p in rest.json()["posts"]] == [ids[0]]
        assert rest.json()["next_cursor"] == ""
        top = await bob.get("/v1/posts", params={"tag": tag, "sort": "top"})
        assert [p["id"] for p in top.json()["posts"]] == [ids[0], ids[2], ids[1]]

        cursor = page["next_cursor"]
        for params, word in (
            (
                {"tag": tag, "cursor": cursor[:-3] + ("AAA" if cursor[-3:] != "AAA" else "BBB")},
                "cursor",
            ),
            ({"tag": tag, "cursor": cursor, "sort": "top"}, "cursor"),
            ({"cursor": cursor}, "cursor"),
            ({"limit": 0}, "limit"),
            ({"limit": limits.POSTS_LIMIT_MAX + 1}, "limit"),
            ({"sort": "oldest"}, "sort"),
            ({"tag": "t" * (limits.TAG_MAX_CHARS + 1)}, "tag"),
            ({"tag": "two words"}, "tag"),
        ):
            refused = await bob.get("/v1/posts", params=params)
            assert refused.status_code == 400, (params, refused.text)
            assert refused.json()["error"] == "invalid_argument"
            assert word in refused.json()["detail"], refused.text

        # Names are unique ignoring case; hostile ones are refused naming the field.
        taken = await bob.put("/v1/me", json={"display_name": "CAROL <I>c</I>"})
        assert taken.status_code == 409 and taken.json()["error"] == "display_name_taken"
        for body in (
            {"display_name": "a\u202eb"},
            {"display_name": "two\nlines"},
            {"display_name": "x" * (limits.DISPLAY_NAME_MAX_CHARS + 1)},
            {"display_name": "admin"},
            {"display_name": "ok", "principal_id": "admin"},
            {},
        ):
            refused = await bob.put("/v1/me", json=body)
            assert refused.status_code == 400, (body, refused.text)
            assert "display_name" in refused.text or "principal_id" in refused.text

        # Hidden notes are off the listing for everyone but admins.
        hidden = await admin.post(f"/v1/posts/{ids[1]}/hide", json={"reason": "spam"})
        assert hidden.status_code == 200, hidden.text
        shown = await carol.get("/v1/posts", params={"tag": tag})
        assert [p["id"] for p in shown.json()["posts"]] == [ids[2], ids[0]]
        moderated = (await admin.get("/v1/posts", params={"tag": tag})).json()["posts"]
        assert [(p["id"], p["hidden"]) for p in moderated][1] == (ids[1], True)

        cleared = await carol.put("/v1/me", json={"display_name": None})
        assert cleared.json()["display_name"] is None
        assert (await bob.get(f"/v1/posts/{ids[0]}")).json()["author_name"] is None
    for route in (("GET", "/v1/posts"), ("GET", "/v1/me"), ("PUT", "/v1/me")):
        assert contract.checked.get(route), route


# ---- repositories, collections, jobs, routing, search ----


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
    "PATH": "/usr/bin:/bin",
}


def _git_repo(root: Path) -> Path:
    repo = root / "billing"
    (repo / "billing").mkdir(parents=True)
    (repo / "billing" / "retry.py").write_text(
        "def retry_charge(charge, attempts=3):\n"
        '    """Retries a failed charge with exponential backoff."""\n'
        "    for attempt in range(attempts):\n"
        "        if charge.submit():\n"
        "            return True\n"
        "    return False\n"
    )
    (repo / "README.md").write_text("# Billing\n\nCharges customers and retries failed charges.\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=GIT_ENV)
    return repo


def _commit_all(repo: Path, message: str) -> str:
    for args in (["add", "."], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=GIT_ENV)
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


async def test_repository_lifecycle_and_acl(
    stack: Stack, alice: httpx.AsyncClient, bob: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    source = _git_repo(stack.data_dir / "src")
    # A server path and a new repository are an admin's to index; Alice gets write access.
    started = await admin.post(
        "/api/repositories", json={"source": str(source), "slug": "example.com/acme/billing"}
    )
    assert started.status_code == 202, started.text
    job = started.json()["job"]
    assert job["kind"] == "repository" and job["state"] in ("queued", "running", "succeeded")
    final = await wait_job(admin, job["id"])
    assert final["state"] == "succeeded", final
    writer = {"principal_id": "alice", "repository": "example.com/acme/billing", "role": "write"}
    granted = await admin.post("/api/access/grant", json=writer)
    assert granted.status_code == 200 and granted.json() == {"changed": True}, granted.text
    # Alice may follow the finished job now that she reads its repository.
    assert (await alice.get(f"/api/jobs/{job['id']}")).json()["state"] == "succeeded"

    repos = (await alice.get("/api/repositories")).json()["repositories"]
    assert [r["slug"] for r in repos] == ["example.com/acme/billing"]
    repo = (await alice.get("/api/repositories/example.com/acme/billing")).json()
    assert repo["commit"] and repo["indexed_at"].endswith("Z") and repo["node_count"] >= 1
    assert repo["branch"] == "main" and repo["public"] is False
    assert repo["freshness"] == "current" and repo["head_commit"] == repo["commit"]
    assert repo["freshness_detail"] == ""

    # Bob was granted nothing: the private repository does not exist for him.
    assert (await bob.get("/api/repositories")).json()["repositories"] == []
    hidden = await bob.get("/api/repositories/example.com/acme/billing")
    assert hidden.status_code == 404
    routed = await bob.post("/api/route", json={"query": "billing retry charge"})
    assert routed.status_code == 200, routed.text
    assert routed.json()["repositories"] == []
    assert (await bob.delete("/api/repositories/example.com/acme/billing")).status_code == 404

    # Alice (granted it) and the admin see it, and routing finds it.
    for client in (alice, admin):
        route = await client.post(
            "/api/route", json={"query": "billing retry charge", "max_repositories": 2}
        )
        assert route.status_code == 200, route.text
        top = route.json()["repositories"][0]
        # One repository: every idf is log(2/2) = 0, so the score is 0 by the routing formula.
        assert top["slug"] == "example.com/acme/billing" and 0 <= top["confidence"] <= 1
        assert top["rationale"]

    # A key created with a grant reads the private repository.
    created = await admin.post(
        "/api/keys", json={"name": "carol", "grant_repositories": ["example.com/acme/billing"]}
    )
    assert created.status_code == 201, created.text
    async with stack.client(created.json()["key"]) as carol:
        repos = (await carol.get("/api/repositories")).json()["repositories"]
        assert [r["slug"] for r in repos] == ["example.com/acme/billing"]

    search = await alice.post(
        "/api/search",
        json={
            "query": "retry_charge",
            "repo": "example.com/acme/billing",
            "top_k": 3,
            "snippet_chars": 120,
            "layers": ["code"],
            "verbose": True,
        },
    )
    assert search.status_code == 200, search.text
    body = search.json()
    assert set(body["streams"]) == {"vector", "lexical", "symbol", "reasons"}
    assert body["streams"]["reasons"] == {}  # every stream ran
    top = body["results"][0]
    assert top["qualified_name"].endswith("retry_charge") and top["layer"] == "code"
    assert top["path"] == "billing/retry.py" and top["start_line"] == 1
    assert top["repo"] == "example.com/acme/billing" and top["commit"] == repo["commit"]
    assert {p["stream"] for p in top["provenance"]} <= {"vector", "lexical", "symbol"}
    assert len(top["snippet"]) <= 120 and isinstance(top["truncated"], bool)
    # Bob has no grant: the same query finds nothing of the private repository.
    hidden_search = await bob.post("/api/search", json={"query": "retry_charge"})
    assert hidden_search.status_code == 200 and hidden_search.json()["results"] == []

    graph = await alice.post(
        "/api/graph", json={"repo": "example.com/acme/billing", "symbol": "retry_charge"}
    )
    assert graph.status_code == 200, graph.text
    assert graph.json()["definitions"][0]["qualified_name"].endswith("retry_charge")
    hidden_graph = await bob.post(
        "/api/graph", json={"repo": "example.com/acme/billing", "symbol": "retry_charge"}
    )
    assert hidden_graph.status_code in (200, 404), hidden_graph.text
    if hidden_graph.status_code == 200:
        assert hidden_graph.json()["definitions"] == []

    await _access_by_grant_and_visibility(alice, bob, admin)

    # A commit after indexing: the repository reports itself stale, with the new head.
    (source / "billing" / "refund.py").write_text("def refund(charge):\n    return charge\n")
    head = _commit_all(source, "refunds")
    stale = (await alice.get("/api/repositories/example.com/acme/billing")).json()
    assert stale["freshness"] == "stale" and stale["head_commit"] == head != stale["commit"]

    # A write grant is not ownership: only an admin deletes.
    assert (await alice.delete("/api/repositories/example.com/acme/billing")).status_code == 403
    assert (await admin.delete("/api/repositories/example.com/acme/billing")).status_code == 204
    assert (await alice.get("/api/repositories/example.com/acme/billing")).status_code == 404


async def _slugs(client: httpx.AsyncClient) -> list[str]:
    return [r["slug"] for r in (await client.get("/api/repositories")).json()["repositories"]]


async def _access_by_grant_and_visibility(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    slug = "example.com/acme/billing"
    grant = {"principal_id": "bob", "repository": slug}
    # Only admins change access, even for a principal that may write the repository.
    denied = await alice.post("/api/access/grant", json=grant)
    assert denied.status_code == 403 and denied.json()["error"] == "permission_denied"

    granted = await admin.post("/api/access/grant", json=grant)
    assert granted.status_code == 200 and granted.json() == {"changed": True}, granted.text
    assert (await admin.post("/api/access/grant", json=grant)).json() == {"changed": False}
    assert await _slugs(bob) == [slug]
    revoked = await admin.post("/api/access/revoke", json=grant)
    assert revoked.status_code == 200 and revoked.json() == {"changed": True}
    assert (await admin.post("/api/access/revoke", json=grant)).json() == {"changed": False}
    assert await _slugs(bob) == []
    routed = await bob.post("/api/route", json={"query": "billing retry charge"})
    assert routed.json()["repositories"] == []

    public = await admin.post("/api/access/visibility", json={"repository": slug, "public": True})
    assert public.status_code == 200 and public.json() == {"changed": True}
    assert await _slugs(bob) == [slug]
    assert (await bob.get(f"/api/repositories/{slug}")).json()["public"] is True
    private = {"repository": slug, "public": False}
    assert (await admin.post("/api/access/visibility", json=private)).json() == {"changed": True}
    assert await _slugs(bob) == []

    unknown = await admin.post(
        "/api/access/grant", json={"principal_id": "bob", "repository": "example.com/no/such"}
    )
    assert unknown.status_code == 404, unknown.text
    bad_bodies: list[tuple[str, dict[str, Any]]] = [
        ("/api/access/grant", {"principal_id": "bob"}),
        ("/api/access/grant", {"principal_id": "bob", "repository": slug, "collection": "c"}),
        ("/api/access/grant", {"principal_id": "bad principal", "repository": slug}),
        ("/api/access/revoke", {"repository": slug}),
        ("/api/access/visibility", {"repository": slug}),
        ("/api/access/visibility", {"repository": slug, "public": "yes"}),
        ("/api/access/visibility", {"public": True}),
    ]
    for path, body in bad_bodies:
        reply = await admin.post(path, json=body)
        assert reply.status_code == 400, (path, body, reply.text)
        assert reply.json()["error"] == "invalid_argument"


async def test_collection_upload_and_jobs(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    started = await admin.post(
        "/api/collections",
        json={
            "name": "glossary",
            "description": "Terms used across teams",
            "documents": [{"path": "terms.md", "content": "# Terms\n\nA charge is a payment."}],
            "grant_principal_ids": ["alice"],
        },
    )
    assert started.status_code == 202, started.text
    final = await wait_job(admin, started.json()["job"]["id"])
    assert final["state"] == "succeeded", final
    names = [c["name"] for c in (await alice.get("/api/collections")).json()["collections"]]
    assert names == ["glossary"]
    assert (await bob.get("/api/collections")).json()["collections"] == []

    missing = await alice.get("/api/jobs/no-such-job")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    bodies: list[dict[str, Any]] = [
        {"name": "x"},
        {"name": "x", "documents": [{"path": "/abs.md", "content": "x"}]},
        {"documents": []},
    ]
    for body in bodies:
        reply = await alice.post("/api/collections", json=body)
        assert reply.status_code == 400, (body, reply.text)
    bad_source = await admin.post("/api/repositories", json={"source": "/definitely/not/here"})
    assert bad_source.status_code == 400 and "source" in bad_source.json()["detail"]
    # A non-admin learns nothing about server paths: refused before the path is looked at.
    server_path = await alice.post("/api/repositories", json={"source": "/definitely/not/here"})
    assert server_path.status_code == 403, server_path.text


async def test_search_and_route_validation(alice: httpx.AsyncClient) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("/api/search", {}),
        ("/api/search", {"query": "   "}),
        ("/api/search", {"query": "x", "top_k": 0}),
        ("/api/search", {"query": "x", "top_k": "3"}),
        ("/api/search", {"query": "x", "snippet_chars": 79}),
        ("/api/search", {"query": "x", "snippet_chars": 4001}),
        ("/api/search", {"query": "x", "layers": ["bytecode"]}),
        ("/api/search", {"query": "x", "since": "yesterday"}),
        ("/api/search", {"query": "x", "unknown": True}),
        ("/api/route", {"query": "x", "max_repositories": 21}),
        ("/api/route", {"query": ""}),
    ]
    for path, body in cases:
        reply = await alice.post(path, json=body)
        assert reply.status_code == 400, (path, body, reply.text)
        assert reply.json()["error"] == "invalid_argument"


# ---- metrics and request ids ----


async def test_metrics_count_per_route_template_and_status(
    stack: Stack, alice: httpx.AsyncClient
) -> None:
    async with stack.client() as anon:
        before = await stack.scrape()
        missing = "00000000-0000-4000-8000-000000000001"
        for _ in range(3):
            assert (await alice.get(f"/v1/posts/{missing}")).status_code == 404
        assert (await anon.get("/v1/search?q=x")).status_code == 401
        after = await stack.scrape()
    name = "cograph_gateway_requests_total"
    labels = {"method": "GET", "route": "/v1/posts/{post_id}", "status": "404"}
    assert metric_value(after, name, **labels) - metric_value(before, name, **labels) == 3
    unauth = {"method": "GET", "route": "unmatched", "status": "401"}
    assert metric_value(after, name, **unauth) - metric_value(before, name, **unauth) >= 1
    assert "cograph_gateway_request_duration_seconds_bucket" in after
    assert missing not in after  # raw paths never become labels


async def test_request_id_is_echoed(alice: httpx.AsyncClient) -> None:
    reply = await alice.get("/api/repositories", headers={"x-request-id": "req-123"})
    assert reply.headers["x-request-id"] == "req-123"
    generated = await alice.get("/api/repositories", headers={"x-request-id": "bad id!"})
    assert generated.headers["x-request-id"] != "bad id!"


# ---- the access log ----


def _access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The gateway's access lines as the service writes them (svckit's JSON formatter)."""
    formatter = JsonFormatter("gateway")
    lines = [formatter.format(r) for r in caplog.records if r.name == "gateway.access"]
    assert all("\x1b" not in line for line in lines)
    return [json.loads(line) for line in lines]


async def test_access_log_names_route_status_and_principal_never_the_key(
    stack: Stack, alice: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    # A second key acting for alice: the line names the key used, beside the principal.
    second, second_secret = await KeysStore(stack.gateway.pool).create(
        "alice-laptop", "alice", False, existing_principal=True
    )
    wrong = "cg_" + "s3cret" * 6
    slug = "github.com%2Facme%2Fbilling"
    async with stack.client() as anon:
        refused = await anon.get(
            f"/api/repositories/{slug}?token=hunter2", headers={"Authorization": f"Bearer {wrong}"}
        )
        missing = await anon.post("/mcp", json={})
    served = await alice.get("/api/repositories?token=hunter2", headers={"x-request-id": "rq-7"})
    forbidden = await alice.get("/api/keys")
    async with stack.client(second_secret) as laptop:
        other_key = await laptop.get("/api/repositories", headers={"x-request-id": "rq-8"})
    assert other_key.status_code == 200
    assert (refused.status_code, missing.status_code) == (401, 401)
    assert (served.status_code, forbidden.status_code) == (200, 403)

    lines = _access_lines(caplog)
    text = "\n".join(json.dumps(line) for line in lines)
    assert wrong not in text and "s3cret" not in text and "hunter2" not in text
    assert (await stack.key("alice")) not in text and "acme" not in text
    assert second_secret not in text and second_secret[:12] not in text
    by_id = {line.get("request_id"): line for line in lines}

    bad_key = by_id[refused.headers["x-request-id"]]
    assert bad_key["route"] == "/api/repositories/{slug:path}" and bad_key["status"] == 401
    assert bad_key["method"] == "GET" and bad_key["error"] == "unauthenticated"
    assert "invalid or revoked" in bad_key["auth_failure"] and "principal" not in bad_key
    assert "key" not in bad_key and "key_id" not in bad_key

    no_key = by_id[missing.headers["x-request-id"]]
    assert no_key["route"] == "/mcp" and "missing API key" in no_key["auth_failure"]

    ok = by_id["rq-7"]
    assert ok["route"] == "/api/repositories" and ok["status"] == 200
    assert ok["principal"] == "alice" and ok["admin"] is False
    assert ok["key"] == "alice" and ok["key_id"] != second.id
    laptop_line = by_id["rq-8"]
    assert laptop_line["principal"] == "alice" and laptop_line["key"] == "alice-laptop"
    assert laptop_line["key_id"] == second.id
    assert ok["duration_ms"] >= 0 and "auth_failure" not in ok

    denied = by_id[forbidden.headers["x-request-id"]]
    assert denied["status"] == 403 and denied["principal"] == "alice"
    assert denied["error"] == "permission_denied" and denied["auth_failure"]

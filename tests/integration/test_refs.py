"""Named refs through the gateway: a local git repository with a default branch and a
second branch (and a tag) whose code differs. The default branch is indexed as the
repository, the second branch as a ref (POST /api/repositories/{slug}/refs); search sees
each branch's code only where expected (with and without `ref`), read takes `ref`,
GET .../refs lists the indexed refs and the source's, MCP cograph_list_refs does too, a
read-only key may list but not add, hostile ref names are refused, and removing the ref
removes its index. One module stack (retrieval only) and two index runs of a tiny repo."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from cograph_api import limits
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.mcp_client import call
from tests.integration.support.mcp_client import http_client as mcp
from tests.integration.support.stacks import Stack, gateway_stack, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/acme/ledger"
MAIN_CODE = '''def settle_invoice(invoice_id: str) -> str:
    """Settles an invoice on the default branch."""
    return "settled " + invoice_id
'''
RELEASE_CODE = '''def refund_payment(payment_id: str) -> str:
    """Refunds a payment: only the release branch has this."""
    return "refunded " + payment_id
'''


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("gw-refs")
    root = base / "src" / "ledger"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "ledger/billing.py", MAIN_CODE)
    commit_all(root, "main", JAN)
    git(root, "tag", "-a", "v1.0", "-m", "first release")
    git(root, "checkout", "-q", "-b", "release/2.0")
    write(root, "ledger/billing.py", RELEASE_CODE)
    commit_all(root, "release", JAN)
    git(root, "checkout", "-q", "main")
    async with gateway_stack(pg_server_url, embedder_address, base, services=("retrieval",)) as s:
        async with s.client(s.admin_key) as admin:
            started = await admin.post(
                "/api/repositories", json={"source": str(root), "slug": SLUG}
            )
            assert started.status_code == 202, started.text
            assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
            for principal, role in (("reader", "read"), ("writer", "write")):
                await s.key(principal)
                granted = await admin.post(
                    "/api/access/grant",
                    json={"principal_id": principal, "repository": SLUG, "role": role},
                )
                assert granted.status_code == 200, granted.text
            await s.key("stranger")
        yield s


async def _search(stack: Stack, key: str, query: str, **scope: str) -> list[dict]:
    async with stack.client(key) as rest:
        reply = await rest.post(
            "/api/search", json={"query": query, "verbose": True, "top_k": 20, **scope}
        )
    assert reply.status_code == 200, reply.text
    return list(reply.json()["results"])


async def test_a_second_ref_is_indexed_searched_listed_and_removed(stack: Stack) -> None:
    reader, writer = await stack.key("reader"), await stack.key("writer")
    async with stack.client(writer) as rest:
        added = await rest.post(f"/api/repositories/{SLUG}/refs", json={"ref": "release/2.0"})
        assert added.status_code == 202, added.text
        job = await wait_job(rest, added.json()["job"]["id"])
        assert job["state"] == "succeeded", job
        assert job["target"] == f"{SLUG}@release/2.0"

    # Without ref: default branches only, so the release branch's code is not found.
    default = await _search(stack, reader, "refund_payment")
    assert all(r["repo"] == SLUG and not r.get("ref") for r in default)
    assert not any("refund_payment" in r["snippet"] for r in default)
    assert any("settle_invoice" in r["snippet"] for r in await _search(stack, reader, "settle"))
    # With ref: that branch's code only, with the ref named on each result.
    released = await _search(stack, reader, "refund_payment", repo=SLUG, ref="release/2.0")
    assert released and released[0]["qualified_name"].endswith("refund_payment")
    assert all(r["repo"] == SLUG and r["ref"] == "release/2.0" for r in released)
    assert not any("settle_invoice" in r["snippet"] for r in released)

    async with stack.client(reader) as rest:
        read = await rest.post(
            "/api/read", json={"repo": SLUG, "ref": "release/2.0", "path": "ledger/billing.py"}
        )
        assert read.status_code == 200, read.text
        assert read.json()["content"] == RELEASE_CODE and read.json()["ref"] == "release/2.0"
        main = await rest.post("/api/read", json={"repo": SLUG, "path": "ledger/billing.py"})
        assert main.json()["content"] == MAIN_CODE
        grep = await rest.post("/api/grep", json={"pattern": "refunded"})
        assert grep.status_code == 200 and grep.json()["matches"] == [], grep.text

        listed = await rest.get(f"/api/repositories/{SLUG}/refs", params={"remote": "true"})
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["default_branch"] == "main"
        (ref,) = body["refs"]
        assert (ref["name"], ref["kind"], ref["state"]) == ("release/2.0", "branch", "succeeded")
        assert len(ref["commit"]) == 40 and ref["file_count"] == 1
        remote = {(r["name"], r["kind"]) for r in body["remote_refs"]}
        assert remote == {("main", "branch"), ("release/2.0", "branch"), ("v1.0", "tag")}
        # The repository list shows repositories, not their refs.
        repos = (await rest.get("/api/repositories")).json()["repositories"]
        assert [r["slug"] for r in repos] == [SLUG]

    async with mcp(stack, reader) as session:
        error, content = await call(session, "cograph_list_refs", {"repo": SLUG})
        assert not error, content
        assert [r["name"] for r in content["refs"]] == ["release/2.0"]
        error, content = await call(
            session,
            "cograph_search",
            {"query": "refund_payment", "repo": SLUG, "ref": "release/2.0"},
        )
        assert not error, content
        assert content["ref"] == "release/2.0" and content["results"], content

    async with stack.client(writer) as rest:
        removed = await rest.delete(f"/api/repositories/{SLUG}/refs", params={"ref": "release/2.0"})
        assert removed.status_code == 204, removed.text
        gone = await rest.post(
            "/api/search", json={"query": "refund_payment", "repo": SLUG, "ref": "release/2.0"}
        )
        assert gone.status_code == 404, gone.text
        assert (await rest.get(f"/api/repositories/{SLUG}/refs")).json().get("refs", []) == []


async def test_refs_follow_the_repository_access(stack: Stack) -> None:
    async with stack.client(await stack.key("reader")) as rest:
        refused = await rest.post(f"/api/repositories/{SLUG}/refs", json={"ref": "v1.0"})
        assert refused.status_code == 403, refused.text
        listed = await rest.get(f"/api/repositories/{SLUG}/refs")
        assert listed.status_code == 200, listed.text
    async with stack.client(await stack.key("stranger")) as rest:
        for reply in (
            await rest.get(f"/api/repositories/{SLUG}/refs"),
            await rest.post(f"/api/repositories/{SLUG}/refs", json={"ref": "v1.0"}),
            await rest.post(
                "/api/search", json={"query": "settle", "repo": SLUG, "ref": "release/2.0"}
            ),
        ):
            assert reply.status_code == 404, reply.text


@pytest.mark.parametrize(
    ("ref", "status", "detail"),
    [
        ("--upload-pack=touch /tmp/x", 400, "ref"),
        ("a..b", 400, "ref"),
        ("refs/heads/main", 400, "ref"),
        ("x@{1}", 400, "ref"),
        ("x\ty", 400, "ref"),
        ("a" * (limits.REF_MAX_CHARS + 1), 400, "ref"),
        ("no-such-branch", 400, "no such branch or tag"),
    ],
)
async def test_hostile_and_unknown_ref_names_are_refused(
    stack: Stack, ref: str, status: int, detail: str
) -> None:
    async with stack.client(await stack.key("writer")) as rest:
        reply = await rest.post(f"/api/repositories/{SLUG}/refs", json={"ref": ref})
        assert reply.status_code == status, reply.text
        assert detail in reply.text
        searched = await rest.post(
            "/api/search", json={"query": "settle", "repo": SLUG, "ref": ref}
        )
        assert searched.status_code in (400, 404), searched.text
        no_repo = await rest.post("/api/search", json={"query": "settle", "ref": "main"})
        assert no_repo.status_code == 400 and "ref needs repo" in no_repo.text


async def test_a_tag_is_indexed_at_the_commit_it_names(stack: Stack) -> None:
    """`v1.0` names main's first commit: its index holds that commit's code, listed as a tag,
    searched apart from the branches."""
    reader, writer = await stack.key("reader"), await stack.key("writer")
    async with stack.client(writer) as rest:
        added = await rest.post(f"/api/repositories/{SLUG}/refs", json={"ref": "v1.0"})
        assert added.status_code == 202, added.text
        assert (await wait_job(rest, added.json()["job"]["id"]))["state"] == "succeeded"
    tagged = await _search(stack, reader, "settle_invoice", repo=SLUG, ref="v1.0")
    assert tagged and all(r["ref"] == "v1.0" for r in tagged)
    assert any("settle_invoice" in r["snippet"] for r in tagged)
    released = await _search(stack, reader, "refund_payment", repo=SLUG, ref="v1.0")
    assert not any("refund_payment" in r["snippet"] for r in released)
    async with stack.client(reader) as rest:
        listed = (await rest.get(f"/api/repositories/{SLUG}/refs")).json()["refs"]
        assert [(r["name"], r["kind"], r["state"]) for r in listed] == [
            ("v1.0", "tag", "succeeded")
        ]
    async with stack.client(writer) as rest:
        removed = await rest.delete(f"/api/repositories/{SLUG}/refs", params={"ref": "v1.0"})
        assert removed.status_code == 204, removed.text

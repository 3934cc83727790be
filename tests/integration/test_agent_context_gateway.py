"""The agent context API through the gateway: REST (/api/read, /api/files, /api/grep,
/api/references) and the MCP tools (cograph_read, cograph_files, cograph_grep,
cograph_references, cograph_index, commons_comment) through the official MCP client, each
under the key's access: a key without access to a repository gets 404 everywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator

import mcp_types as types
import pytest
import pytest_asyncio

from cograph_api import limits
from cograph_api.mcp_tools import OUTPUT_SCHEMAS
from cograph_api.tokens import default_counter
from tests.integration.support import forged_cursors
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.mcp_client import call
from tests.integration.support.mcp_client import http_client as mcp
from tests.integration.support.stacks import Stack, gateway_stack, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/acme/shop"
CART = '''"""The cart."""


def add_item(cart: list, item: str) -> list:
    """Adds one item."""
    return [*cart, item]


def checkout(cart: list) -> int:
    total = 0
    for item in cart:
        cart = add_item(cart, item)
        total += 1
    return total
'''


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("gw-agent")
    root = base / "src" / "shop"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "shop/cart.py", CART)
    write(root, "docs/notes.md", "# Notes\n\nThe cart adds items.\n")
    commit_all(root, "shop", JAN)
    async with gateway_stack(pg_server_url, embedder_address, base) as s:
        async with s.client(s.admin_key) as admin:
            started = await admin.post(
                "/api/repositories", json={"source": str(root), "slug": SLUG}
            )
            assert started.status_code == 202, started.text
            assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
            reader = await s.key("reader")
            await s.key("stranger")
            granted = await admin.post(
                "/api/access/grant", json={"principal_id": "reader", "repository": SLUG}
            )
            assert granted.status_code == 200, granted.text
            assert reader
        yield s


async def test_rest_read_files_grep_references(stack: Stack) -> None:
    async with stack.client(await stack.key("reader")) as rest:
        read = await rest.post("/api/read", json={"repo": SLUG, "path": "shop/cart.py"})
        assert read.status_code == 200, read.text
        body = read.json()
        assert body["content"] == CART and body["total_lines"] == CART.count("\n")
        assert len(body["commit"]) == 40 and body["next_start_line"] is None
        part = await rest.post(
            "/api/read", json={"repo": SLUG, "path": "shop/cart.py", "start_line": 4, "end_line": 4}
        )
        assert part.json()["content"] == "def add_item(cart: list, item: str) -> list:\n"

        files = await rest.get("/api/files", params={"repo": SLUG})
        assert files.status_code == 200, files.text
        assert [f["path"] for f in files.json()["files"]] == ["docs/notes.md", "shop/cart.py"]
        assert files.json()["files"][1] == {
            "path": "shop/cart.py",
            "language": "python",
            "size": len(CART.encode()),
        }
        paged = await rest.get("/api/files", params={"repo": SLUG, "limit": 1})
        assert paged.json()["truncated"] and paged.json()["next_cursor"]
        rest_of = await rest.get(
            "/api/files", params={"repo": SLUG, "cursor": paged.json()["next_cursor"]}
        )
        assert [f["path"] for f in rest_of.json()["files"]] == ["shop/cart.py"]

        grep = await rest.post("/api/grep", json={"repo": SLUG, "pattern": "add_item("})
        assert grep.status_code == 200, grep.text
        assert [(m["path"], m["line"]) for m in grep.json()["matches"]] == [
            ("shop/cart.py", 4),
            ("shop/cart.py", 12),
        ]
        regex = await rest.post(
            "/api/grep", json={"repo": SLUG, "pattern": r"^def (\w+)\(", "regex": True}
        )
        assert [m["line"] for m in regex.json()["matches"]] == [4, 9]

        refs = await rest.post("/api/references", json={"repo": SLUG, "symbol": "add_item"})
        assert refs.status_code == 200, refs.text
        assert [d["qualified_name"] for d in refs.json()["definitions"]] == ["shop.cart.add_item"]
        assert [(r["symbol"], r["kind"], r["line"]) for r in refs.json()["references"]] == [
            ("shop.cart.checkout", "calls", 12)
        ]


async def test_rest_refuses_hostile_input(stack: Stack) -> None:
    async with stack.client(await stack.key("reader")) as rest:
        for path in ("../etc/passwd", "/etc/passwd", "shop/../shop/cart.py"):
            reply = await rest.post("/api/read", json={"repo": SLUG, "path": path})
            assert reply.status_code == 400, (path, reply.text)
        nul = await rest.post("/api/read", json={"repo": SLUG, "path": "shop/cart.py\u0000"})
        assert nul.status_code == 400
        both = await rest.post("/api/read", json={"repo": SLUG, "collection": "c", "path": "a"})
        assert both.status_code == 400
        assert (
            await rest.get("/api/files", params={"repo": SLUG, "prefix": "../"})
        ).status_code == 400
        assert (
            await rest.get("/api/files", params={"repo": SLUG, "prefix": "/etc"})
        ).status_code == 400
        bad_cursor = await rest.get("/api/files", params={"repo": SLUG, "cursor": "e30"})
        assert bad_cursor.status_code == 400
        for body in (
            {"pattern": "(", "regex": True},
            {"pattern": "x" * 501},
            {"pattern": ""},
            {"pattern": "x", "limit": 5000},
        ):
            reply = await rest.post("/api/grep", json={"repo": SLUG, **body})
            assert reply.status_code == 400, (body, reply.text)
        tampered = await rest.post(
            "/api/references", json={"repo": SLUG, "symbol": "add_item", "cursor": "AAAA"}
        )
        assert tampered.status_code == 400
        # Forged cursors (unsigned old format, or signed with the secret) with a line
        # beyond PostgreSQL's integer or a NUL in the path: 400 naming the cursor, not 502.
        scope = forged_cursors.refs_scope(SLUG, "add_item")
        for cursor in forged_cursors.forgeries(
            "refs", scope, forged_cursors.HOSTILE_REFS_POSITIONS
        ):
            forged = await rest.post(
                "/api/references", json={"repo": SLUG, "symbol": "add_item", "cursor": cursor}
            )
            assert forged.status_code == 400, (cursor, forged.text)
            assert "cursor" in forged.text, forged.text
        for cursor in forged_cursors.forgeries(
            "files", forged_cursors.files_scope(SLUG), forged_cursors.HOSTILE_FILES_POSITIONS
        ):
            forged = await rest.get("/api/files", params={"repo": SLUG, "cursor": cursor})
            assert forged.status_code == 400, (cursor, forged.text)


async def test_a_key_without_access_gets_404_everywhere(stack: Stack) -> None:
    async with stack.client(await stack.key("stranger")) as rest:
        replies = [
            await rest.post("/api/read", json={"repo": SLUG, "path": "shop/cart.py"}),
            await rest.get("/api/files", params={"repo": SLUG}),
            await rest.post("/api/grep", json={"repo": SLUG, "pattern": "cart"}),
            await rest.post("/api/references", json={"repo": SLUG, "symbol": "add_item"}),
        ]
        unknown = await rest.post(
            "/api/read", json={"repo": "example.com/acme/none", "path": "shop/cart.py"}
        )
    assert [r.status_code for r in replies] == [404] * 4
    assert {r.json()["error"] for r in replies} == {"not_found"}
    assert unknown.status_code == 404
    async with mcp(stack, await stack.key("stranger")) as client:
        for name, args in (
            ("cograph_read", {"repo": SLUG, "path": "shop/cart.py"}),
            ("cograph_files", {"repo": SLUG}),
            ("cograph_grep", {"repo": SLUG, "pattern": "cart"}),
            ("cograph_references", {"repo": SLUG, "symbol": "add_item"}),
            ("cograph_index", {"repo": SLUG}),
        ):
            failed, error = await call(client, name, args)
            assert failed and error["error"] == "not_found", (name, error)


async def test_mcp_tools_declare_output_schemas_and_answer(stack: Stack) -> None:
    async with mcp(stack, await stack.key("reader")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name, schema in OUTPUT_SCHEMAS.items():
            assert tools[name].output_schema == schema, name
        assert set(tools) == set(OUTPUT_SCHEMAS)
        # Each call below is validated by the client against the tool's output schema.
        failed, read = await call(
            client, "cograph_read", {"repo": SLUG, "path": "shop/cart.py", "start_line": 9}
        )
        assert not failed and read["content"].startswith("def checkout"), read
        failed, files = await call(client, "cograph_files", {"repo": SLUG, "prefix": "shop/"})
        assert not failed and [f["path"] for f in files["files"]] == ["shop/cart.py"]
        failed, grep = await call(client, "cograph_grep", {"repo": SLUG, "pattern": "total"})
        assert not failed and [m["line"] for m in grep["matches"]] == [10, 13, 14]
        failed, refs = await call(
            client, "cograph_references", {"repo": SLUG, "symbol": "add_item", "limit": 1}
        )
        assert not failed and refs["references"][0]["symbol"] == "shop.cart.checkout"
        assert refs["references"][0]["line"] == 12
        failed, error = await call(
            client, "cograph_grep", {"repo": SLUG, "pattern": "(", "regex": True}
        )
        assert failed and error["error"] == "invalid_argument"
        failed, error = await call(client, "cograph_read", {"repo": SLUG, "path": "../x"})
        assert failed and error["error"] == "invalid_argument"
        # A read grant does not re-index.
        failed, error = await call(client, "cograph_index", {"repo": SLUG})
        assert failed and error["error"] == "permission_denied", error
        failed, post = await call(client, "commons_post", {"title": "Cart totals", "body": "b"})
        assert not failed
        failed, comment = await call(
            client, "commons_comment", {"post_id": post["id"], "body": "Confirmed in checkout."}
        )
        assert not failed and comment["comment_count"] == 1, comment
        failed, whole = await call(client, "commons_get", {"post_id": post["id"]})
        assert [c["body"] for c in whole["comments"]] == ["Confirmed in checkout."]

    async with mcp(stack, stack.admin_key) as admin:
        failed, job = await call(admin, "cograph_index", {"repo": SLUG})
        assert not failed and job["job"]["target"] == SLUG, job
    async with stack.client(stack.admin_key) as rest:
        assert (await wait_job(rest, job["job"]["id"]))["state"] == "succeeded"


async def test_search_is_compact_by_default_and_keeps_its_budget(stack: Stack) -> None:
    async with stack.client(await stack.key("reader")) as rest:
        compact = await rest.post("/api/search", json={"query": "add_item", "repo": SLUG})
        assert compact.status_code == 200, compact.text
        top = compact.json()["results"][0]
        assert top["location"].startswith("shop/cart.py:")
        # One repository, one commit: said once on the answer, not on every result.
        assert compact.json()["repo"] == SLUG and len(compact.json()["commit"]) == 12
        assert not {"provenance", "id", "store", "layer", "vector_score", "repo"} & set(top)
        assert "timings_ms" not in compact.json()
        # The query names it: high, and no_good_answer left out of the compact form.
        assert top["confidence"] == "high" and compact.json()["confidence"] == "high"
        assert "no_good_answer" not in compact.json()
        verbose = await rest.post(
            "/api/search", json={"query": "add_item", "repo": SLUG, "verbose": True}
        )
        assert "provenance" in verbose.json()["results"][0]
        assert verbose.json()["no_good_answer"] is False
        assert verbose.json()["results"][0]["confidence"] == "high"
        assert len(compact.text) < len(verbose.text) / 2
        budget = await rest.post(
            "/api/search", json={"query": "cart items", "repo": SLUG, "max_tokens": 60}
        )
        assert budget.status_code == 200 and budget.json()["tokens"] <= 60
        # The bound is on the body the agent receives, counted as the service counts.
        assert 0 < default_counter()(budget.text) <= budget.json()["tokens"]
        roomy = await rest.post(
            "/api/search", json={"query": "cart items", "repo": SLUG, "max_tokens": 400}
        )
        assert len(roomy.json()["results"]) > len(budget.json()["results"])
        assert default_counter()(roomy.text) <= roomy.json()["tokens"] <= 400
        too_small = await rest.post(
            "/api/search", json={"query": "cart", "repo": SLUG, "max_tokens": 10}
        )
        assert too_small.status_code == 400
        # A budget that holds no result says the smallest that holds the first.
        tight = {"query": "cart items", "repo": SLUG, "max_tokens": 50}
        empty = await rest.post("/api/search", json=tight)
        assert empty.status_code == 200 and empty.json()["results"] == [], empty.text
        needed = empty.json()["first_result_tokens"]
        assert needed > 50
        enough = await rest.post("/api/search", json={**tight, "max_tokens": needed})
        assert len(enough.json()["results"]) == 1 and enough.json()["tokens"] <= needed
    async with mcp(stack, await stack.key("reader")) as client:
        failed, found = await call(
            client, "cograph_search", {"query": "checkout", "repo": SLUG, "max_tokens": 80}
        )
        assert not failed and found["tokens"] <= 80 and "omitted" in found, found
        # Validated against the tool's output schema like every call here.
        failed, nonsense = await call(
            client, "cograph_search", {"query": "zzqqxx nothing here", "repo": SLUG}
        )
        assert not failed and nonsense["no_good_answer"] is True, nonsense
        assert nonsense["confidence"] == "low" and nonsense["results"]
        sent = await client.call_tool(
            "cograph_search", {"query": "checkout", "repo": SLUG, "max_tokens": 80}
        )
        text = sent.content[0]
        assert isinstance(text, types.TextContent)
        assert default_counter()(text.text) <= 80


async def test_search_explains_its_ranking_over_rest_and_mcp_and_skips_stages(
    stack: Stack,
) -> None:
    async with stack.client(await stack.key("reader")) as rest:
        asked = {"query": "add_item", "repo": SLUG, "explain": True}
        explained = await rest.post("/api/search", json=asked)
        assert explained.status_code == 200, explained.text
        body = explained.json()
        assert body["explanation"]["query_class"] == "identifier"
        names = [run["name"] for run in body["explanation"]["stages"]]
        assert names[:3] == ["name_words", "shared_summaries", "fusion"] and "pin" in names
        top = body["results"][0]
        assert top["qualified_name"] == "shop.cart.add_item"
        assert top["streams"] and {s["stream"] for s in top["streams"]} >= {"symbol"}
        stages = [effect["stage"] for effect in top["stages"]]
        assert stages[0] == "fusion" and "pin" in stages
        assert top["stages"][-1]["rank_after"] == 1
        # The explanation is part of the answer, so it is counted in its tokens.
        assert default_counter()(explained.text) <= body["tokens"]
        plain = await rest.post("/api/search", json={"query": "add_item", "repo": SLUG})
        assert "explanation" not in plain.json() and "stages" not in plain.json()["results"][0]
        skipped = await rest.post(
            "/api/search", json={**asked, "skip_stages": ["pin", "containment"]}
        )
        runs = {run["name"]: run for run in skipped.json()["explanation"]["stages"]}
        assert runs["pin"] == {"name": "pin", "applied": False, "detail": "skipped by the request"}
        for bad in (["fusion"], ["nope"], "pin"):
            refused = await rest.post("/api/search", json={**asked, "skip_stages": bad})
            assert (refused.status_code, refused.json()["error"]) == (400, "invalid_argument")
    async with mcp(stack, await stack.key("reader")) as client:
        failed, found = await call(
            client, "cograph_search", {"query": "add_item", "repo": SLUG, "explain": True}
        )
        assert not failed and found["explanation"]["query_class"] == "identifier", found
        assert found["results"][0]["stages"][0]["stage"] == "fusion"


async def test_outline_job_and_remove_over_rest_and_mcp(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Outline: a reader gets the file's symbols, a key without access 404 like read.
    async with stack.client(await stack.key("reader")) as rest:
        got = await rest.get("/api/outline", params={"repo": SLUG, "path": "shop/cart.py"})
        assert got.status_code == 200, got.text
        symbols = got.json()["symbols"]
        assert [(s["name"], s["kind"], s["start_line"]) for s in symbols] == [
            ("add_item", "function", 4),
            ("checkout", "function", 9),
        ]
        bad = await rest.get("/api/outline", params={"repo": SLUG, "path": "../etc/passwd"})
        assert (bad.status_code, bad.json()["error"]) == (400, "invalid_argument")
    async with stack.client(await stack.key("stranger")) as rest:
        hidden = await rest.get("/api/outline", params={"repo": SLUG, "path": "shop/cart.py"})
        assert (hidden.status_code, hidden.json()["error"]) == (404, "not_found")
    async with mcp(stack, await stack.key("reader")) as client:
        failed, outline = await call(
            client, "cograph_outline", {"repo": SLUG, "path": "shop/cart.py"}
        )
        assert not failed and [s["name"] for s in outline["symbols"]] == ["add_item", "checkout"]
        # cograph_remove is an admin's: a reader is refused, whatever it names.
        failed, error = await call(client, "cograph_remove", {"repo": SLUG})
        assert failed and error["error"] == "permission_denied", error
        failed, error = await call(client, "cograph_remove", {})
        assert failed and error["error"] == "invalid_argument", error

    # A collection, followed with cograph_job, listed, then removed over REST and MCP.
    docs = tmp_path_factory.mktemp("gw-agent-docs")
    write(docs, "cart.md", "# Cart\n\nHow the cart totals.\n")
    async with stack.client(stack.admin_key) as rest, mcp(stack, stack.admin_key) as admin:
        for name in ("shop-notes", "shop-notes-2"):
            started = await rest.post(
                "/api/collections", json={"name": name, "directory": str(docs)}
            )
            assert started.status_code == 202, started.text
            job_id = started.json()["job"]["id"]
            failed, job = await call(admin, "cograph_job", {"job_id": job_id})
            assert not failed and job["id"] == job_id and job["target"] == name, job
            assert (await wait_job(rest, job_id))["state"] == "succeeded"
        failed, job = await call(admin, "cograph_job", {"job_id": job_id})
        assert not failed and job["state"] == "succeeded" and job["progress"]["files_done"] == 1
        names = {c["name"] for c in (await rest.get("/api/collections")).json()["collections"]}
        assert {"shop-notes", "shop-notes-2"} <= names
        deleted = await rest.delete("/api/collections/shop-notes")
        assert deleted.status_code == 204, deleted.text
        again = await rest.delete("/api/collections/shop-notes")
        assert (again.status_code, again.json()["error"]) == (404, "not_found")
        failed, removed = await call(admin, "cograph_remove", {"collection": "shop-notes-2"})
        assert not failed and removed == {"removed": "shop-notes-2", "kind": "collection"}
        names = {c["name"] for c in (await rest.get("/api/collections")).json()["collections"]}
        assert not names & {"shop-notes", "shop-notes-2"}
        failed, error = await call(admin, "cograph_job", {"job_id": "no-such-job"})
        assert failed and error["error"] == "not_found"


async def test_cograph_index_with_a_source_adds_a_repository_where_the_key_may(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("gw-agent-new") / "till"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "till/drawer.py", "def open_drawer() -> bool:\n    return True\n")
    commit_all(root, "till", JAN)
    new = "example.com/acme/till"
    async with mcp(stack, await stack.key("reader")) as client:
        # Creating is an admin's (RETRIEVAL_CREATE_SOURCES=admin), and so is a server path.
        failed, error = await call(client, "cograph_index", {"repo": new, "source": str(root)})
        assert failed and error["error"] == "permission_denied", error
    async with mcp(stack, stack.admin_key) as admin, stack.client(stack.admin_key) as rest:
        failed, started = await call(admin, "cograph_index", {"repo": new, "source": str(root)})
        assert not failed and started["job"]["target"] == new, started
        assert (await wait_job(rest, started["job"]["id"]))["state"] == "succeeded"
        failed, outline = await call(
            admin, "cograph_outline", {"repo": new, "path": "till/drawer.py"}
        )
        assert not failed and [s["name"] for s in outline["symbols"]] == ["open_drawer"]
        failed, removed = await call(admin, "cograph_remove", {"repo": new})
        assert not failed and removed == {"removed": new, "kind": "repository"}
        assert (await rest.get(f"/api/repositories/{new}")).status_code == 404


async def test_grep_across_readable_repositories_over_rest_and_mcp(stack: Stack) -> None:
    lines = CART.splitlines()
    asked = {"pattern": "ADD_ITEM(", "case_insensitive": True, "context": 1}
    expected = [
        {
            "repo": SLUG,
            "path": "shop/cart.py",
            "line": line,
            "text": lines[line - 1],
            "before": [lines[line - 2]],
            "after": [lines[line]],
        }
        for line in (4, 12)
    ]
    async with stack.client(await stack.key("reader")) as rest:
        reply = await rest.post("/api/grep", json=asked)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["matches"] == expected and not body["truncated"] and body["commit"] == ""
        assert list(body["commits"]) == [SLUG] and len(body["commits"][SLUG]) == 40
        widest = await rest.post("/api/grep", json={**asked, "context": limits.GREP_CONTEXT_MAX})
        assert widest.status_code == 200 and widest.json()["matches"][0]["before"] == lines[:3]
        for bad in (
            {"context": limits.GREP_CONTEXT_MAX + 1},
            {"context": limits.GREP_CONTEXT_MIN - 1},
            {"context": "1"},
            {"case_insensitive": "yes"},
            {"repo": ""},
        ):
            refused = await rest.post("/api/grep", json={**asked, **bad})
            assert refused.status_code == 400, (bad, refused.text)
            assert next(iter(bad)) in refused.text, refused.text
    # A key that reads no repository: an empty answer, not an error.
    async with stack.client(await stack.key("stranger")) as rest:
        nothing = await rest.post("/api/grep", json=asked)
        assert nothing.status_code == 200, nothing.text
        assert nothing.json() == {"matches": [], "truncated": False, "commit": "", "commits": {}}
    async with mcp(stack, await stack.key("reader")) as client:
        # The client validates each answer against the tool's output schema.
        failed, found = await call(client, "cograph_grep", asked)
        assert not failed and found["matches"] == expected, found
        failed, error = await call(client, "cograph_grep", {**asked, "context": 11})
        assert failed and error["error"] == "invalid_argument", error
    async with mcp(stack, await stack.key("stranger")) as client:
        failed, found = await call(client, "cograph_grep", asked)
        assert not failed and found["matches"] == [] and found["commits"] == {}, found

"""The MCP server through the SDK's own client: over streamable HTTP at /mcp on the gateway
(same Bearer keys) and over stdio (`cograph mcp`, which talks to the gateway)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from prometheus_client.parser import text_string_to_metric_families

from cograph_api.mcp_tools import OUTPUT_SCHEMAS, SCHEMAS
from tests.integration.support.git_repos import JAN, MAR, commit_all, git, write
from tests.integration.support.mcp_client import call, http_client
from tests.integration.support.stacks import Stack, gateway_stack, wait_job, wait_searchable

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOOLS = {
    "cograph_search",
    "cograph_route",
    "cograph_graph",
    "cograph_status",
    "commons_search",
    "commons_recent",
    "commons_get",
    "commons_post",
    "commons_vote",
    "commons_comment",
    "commons_anchors",
    "commons_anchor",
    "commons_confirm_anchor",
    "cograph_read",
    "cograph_files",
    "cograph_grep",
    "cograph_references",
    "cograph_index",
    "cograph_job",
    "cograph_outline",
    "cograph_remove",
    "cograph_list_refs",
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url, embedder_address, tmp_path_factory.mktemp("gw-mcp")
    ) as s:
        yield s


async def test_http_lists_tools_with_schemas(stack: Stack) -> None:
    async with http_client(stack, await stack.key("agent-a")) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description and len(tool.description) > 40
        assert tool.input_schema == SCHEMAS[tool.name]
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema == OUTPUT_SCHEMAS[tool.name]


async def test_http_commons_tools_act_for_the_keys_principal(stack: Stack) -> None:
    async with (
        http_client(stack, await stack.key("agent-a")) as a,
        http_client(stack, await stack.key("agent-b")) as b,
    ):
        failed, post = await call(
            a,
            "commons_post",
            {
                "title": "Retry budget lives in billing/retry.py",
                "body": "Change RETRY_BUDGET there, not in the worker config.",
                "tags": ["billing"],
            },
        )
        assert not failed, post
        post_id = post["id"]
        failed, vote = await call(b, "commons_vote", {"post_id": post_id, "direction": "up"})
        assert not failed and vote["score"] == 1
        # An author cannot vote on their own note: the score is what others think of it.
        failed, vote = await call(a, "commons_vote", {"post_id": post_id, "direction": "up"})
        assert failed and vote["error"] == "own_post_vote", vote

        async with stack.client(await stack.key("agent-a")) as rest:
            await wait_searchable(rest, post_id)
        failed, found = await call(b, "commons_search", {"query": "where is the retry budget"})
        assert not failed and found["results"][0]["id"] == post_id
        failed, whole = await call(b, "commons_get", {"post_id": post_id})
        assert not failed and whole["body"].startswith("Change RETRY_BUDGET")
        failed, recent = await call(b, "commons_recent", {"tag": "billing", "limit": 1})
        assert not failed, recent
        assert [p["id"] for p in recent["posts"]] == [post_id]
        assert recent["posts"][0]["author_name"] is None and recent["next_cursor"] == ""
        failed, error = await call(b, "commons_recent", {"cursor": "c1.forged.cursor"})
        assert failed and error["error"] == "invalid_argument" and "cursor" in error["detail"]
        assert whole["comments"] == []

        failed, error = await call(b, "commons_vote", {"post_id": post_id, "direction": "sideways"})
        assert failed and error["error"] == "invalid_argument"
        failed, error = await call(
            b, "commons_get", {"post_id": "00000000-0000-4000-8000-000000000009"}
        )
        assert failed and error["error"] == "not_found"


async def test_http_status_and_route(stack: Stack) -> None:
    async with http_client(stack, stack.admin_key) as client:
        failed, status = await call(client, "cograph_status", {})
        assert not failed, status
        assert status == {"repositories": [], "collections": []}
        failed, routed = await call(client, "cograph_route", {"query": "billing retries"})
        assert not failed, routed
        assert routed["repositories"] == [] and isinstance(routed["collections"], list)
        failed, searched = await call(client, "cograph_search", {"query": "ParseConfig"})
        assert not failed and searched["results"] == [], searched
        failed, graph = await call(
            client, "cograph_graph", {"symbol": "ParseConfig", "repo": "example.com/no/such"}
        )
        assert failed == (graph.get("error") is not None), graph


async def test_http_tool_calls_are_counted_by_tool_and_outcome(stack: Stack) -> None:
    async with http_client(stack, stack.admin_key) as client:
        failed, _ = await call(client, "cograph_status", {})
        assert not failed
        failed, _ = await call(client, "cograph_job", {"job_id": "x" * 5000})
        assert failed
        failed, _ = await call(client, "cograph_no_such_tool_" + "z" * 40, {})
        assert failed
    scraped = await stack.scrape()
    samples = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(scraped)
        for s in family.samples
    }

    def tool_calls(tool: str, outcome: str) -> float:
        labels = frozenset({("tool", tool), ("outcome", outcome)})
        return samples.get(("cograph_gateway_mcp_tool_calls_total", labels), 0.0)

    assert tool_calls("cograph_status", "ok") >= 1
    assert tool_calls("cograph_job", "error") >= 1
    # A name no tool has is counted, but never becomes a label of its own.
    assert tool_calls("unknown", "error") >= 1
    assert "cograph_no_such_tool" not in scraped
    mcp_requests = [
        value
        for (name, labels), value in samples.items()
        if name == "cograph_gateway_requests_total" and ("route", "/mcp") in labels
    ]
    assert sum(mcp_requests) >= 3
    unmatched = [
        labels
        for (name, labels), _ in samples.items()
        if name == "cograph_gateway_requests_total" and ("route", "unmatched") in labels
    ]
    assert not unmatched, unmatched


async def test_http_without_a_key_is_401(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as anon:
        reply = await anon.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert reply.status_code == 401 and reply.json()["error"] == "unauthenticated"


async def test_stdio_cograph_mcp_talks_to_the_gateway(stack: Stack) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COGRAPH_GATEWAY_URL": stack.url,
        "COGRAPH_API_KEY": await stack.key("stdio-agent"),
        # The server runs the code under test, wherever the test's imports come from.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "cograph_cli.mcp_cmd"], env=env
    )
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        failed, post = await call(client, "commons_post", {"title": "stdio note", "body": "hello"})
        assert not failed, post
        failed, whole = await call(client, "commons_get", {"post_id": post["id"]})
        assert not failed and whole["title"] == "stdio note"
        # Through RestClient: GET /v1/posts with the arguments as its query.
        failed, recent = await call(client, "commons_recent", {"sort": "top", "limit": 100})
        assert not failed and post["id"] in [p["id"] for p in recent["posts"]], recent
        failed, status = await call(client, "cograph_status", {})
        assert not failed and status["repositories"] == []
        failed, error = await call(client, "cograph_status", {"repo": "example.com/no/such"})
        assert failed and error["error"] == "not_found"


async def test_status_reports_an_index_stale_against_head(stack: Stack) -> None:
    root = stack.data_dir / "status-src" / "ledger"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "ledger.py", "def post_entry(amount):\n    return amount\n")
    commit_all(root, "ledger", JAN)
    async with stack.client(stack.admin_key) as admin:
        started = await admin.post(
            "/api/repositories", json={"source": str(root), "slug": "example.com/acme/ledger"}
        )
        assert started.status_code == 202, started.text
        assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"

    async with http_client(stack, stack.admin_key) as client:
        failed, status = await call(client, "cograph_status", {"repo": "example.com/acme/ledger"})
        assert not failed, status
        (repo,) = status["repositories"]
        assert repo["stale"] is False and repo["head_commit"] == repo["commit"]
        assert status["collections"] == []

        write(root, "ledger.py", "def post_entry(amount):\n    return round(amount, 2)\n")
        commit_all(root, "round", MAR)
        failed, status = await call(client, "cograph_status", {})
        assert not failed, status
        (repo,) = [r for r in status["repositories"] if r["slug"] == "example.com/acme/ledger"]
        assert repo["stale"] is True and repo["freshness"] == "stale"
        assert repo["head_commit"] == git(root, "rev-parse", "HEAD") != repo["commit"]

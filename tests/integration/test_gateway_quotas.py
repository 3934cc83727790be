"""Per-key limits through the real gateway (REST and MCP) in front of the real services: a
key over its allowance gets 429 rate_limited with Retry-After, while another key is still
served. The allowances are made small (and refill slowly) so the tests are functional: they
count requests, never time them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from gateway.keys_store import KeysStore
from tests.integration.support.mcp_client import call, http_client
from tests.integration.support.stacks import Stack, gateway_stack

BURST = 3
SLOW = "0.01"  # a token every 100 s: nothing refills while a test runs
# Gateway environment (gateway_stack's **overrides), every value a string.
LIMITS: dict[str, Any] = {
    "GATEWAY_QUOTAS": "true",
    **{
        f"GATEWAY_QUOTA_{work}_{what}": value
        for work in ("SEARCH", "GREP", "NOTES", "READ")
        for what, value in (("BURST", str(BURST)), ("RATE", SLOW))
    },
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path_factory.mktemp("gw-quotas"),
        services=("commons", "retrieval"),
        **LIMITS,
    ) as s:
        yield s


def _assert_limited(reply: httpx.Response, work: str) -> None:
    assert reply.status_code == 429, reply.text
    body = reply.json()
    assert body["error"] == "rate_limited", body
    assert f"for {work} requests" in body["detail"], body
    wait = int(reply.headers["retry-after"])
    # One token at 0.01 a second is 100 s away at most; the detail says the same wait.
    assert 1 <= wait <= 100 and f"retry after {wait} s" in body["detail"], body


async def _search(client: httpx.AsyncClient, query: str) -> httpx.Response:
    return await client.post("/api/search", json={"query": query, "top_k": 3})


async def test_a_flooding_key_gets_429_and_another_key_is_still_served(stack: Stack) -> None:
    async with (
        stack.client(await stack.key("flooder")) as flooder,
        stack.client(await stack.key("bystander")) as bystander,
    ):
        # The penetration test's shape: many at once from one key, 4,000 characters each.
        long_query = ("lorem ipsum dolor " * 250)[:4000]
        replies = await asyncio.gather(*(_search(flooder, long_query) for _ in range(12)))
        statuses = sorted(r.status_code for r in replies)
        assert statuses.count(200) <= BURST and statuses.count(429) >= 12 - BURST, statuses
        assert set(statuses) <= {200, 429}, statuses
        _assert_limited(next(r for r in replies if r.status_code == 429), "search")
        # Some were refused for being too many at once, which spends no token: the key gets
        # exactly its burst in all, then only refusals (which refill nothing).
        admitted = statuses.count(200)
        for _ in range(BURST + 1):
            reply = await _search(flooder, "retry budget")
            if reply.status_code != 200:
                break
            admitted += 1
        assert admitted == BURST
        _assert_limited(reply, "search")
        _assert_limited(await _search(flooder, "retry budget"), "search")
        # Another key's allowance is its own.
        for _ in range(BURST):
            assert (await _search(bystander, "retry budget")).status_code == 200
        # The flooder's other classes of work are not spent either.
        assert (await flooder.get("/api/repositories")).status_code == 200


async def test_note_posts_are_limited_per_key(stack: Stack) -> None:
    async with (
        stack.client(await stack.key("poster")) as poster,
        stack.client(await stack.key("other-poster")) as other,
    ):
        note = {"title": "Retry budget", "body": "Lives in billing/retry.py."}
        for _ in range(BURST):
            assert (await poster.post("/v1/posts", json=note)).status_code == 201
        _assert_limited(await poster.post("/v1/posts", json=note), "notes")
        # Votes and comments are note writes too, on the same allowance.
        assert (await other.post("/v1/posts", json=note)).status_code == 201


async def test_grep_is_limited_apart_from_search(stack: Stack) -> None:
    async with stack.client(await stack.key("grepper")) as grepper:
        body = {"repo": "example.com/acme/none", "pattern": "x"}
        for _ in range(BURST):
            # Not found (nothing is indexed), but admitted: each start spends a token.
            assert (await grepper.post("/api/grep", json=body)).status_code == 404
        _assert_limited(await grepper.post("/api/grep", json=body), "grep")
        assert (await _search(grepper, "retry budget")).status_code == 200


async def test_mcp_tools_share_the_keys_allowance(stack: Stack) -> None:
    key = await stack.key("mcp-agent")
    async with stack.client(key) as rest:
        for _ in range(BURST):
            assert (await _search(rest, "retry budget")).status_code == 200
    async with (
        http_client(stack, key) as spent,
        http_client(stack, await stack.key("mcp-other")) as fresh,
    ):
        failed, body = await call(spent, "cograph_search", {"query": "retry budget"})
        assert failed and body["error"] == "rate_limited", body
        assert "for search requests" in body["detail"] and "retry after" in body["detail"], body
        failed, body = await call(fresh, "cograph_search", {"query": "retry budget"})
        assert not failed, body


async def test_admin_keys_are_limited_too(stack: Stack) -> None:
    async with stack.client(stack.admin_key) as admin:
        replies = [await admin.get("/api/repositories") for _ in range(BURST + 1)]
    assert [r.status_code for r in replies] == [200] * BURST + [429]
    _assert_limited(replies[-1], "read")


async def test_openapi_documents_429(stack: Stack) -> None:
    async with stack.client() as anonymous:
        schema = (await anonymous.get("/openapi.json")).json()
    assert "429" in schema["paths"]["/api/search"]["post"]["responses"]
    assert "429" in schema["paths"]["/v1/posts"]["post"]["responses"]


async def test_a_key_over_its_allowance_is_refused_before_its_body_is_parsed(stack: Stack) -> None:
    async with stack.client(await stack.key("unparsed")) as client:
        body = {"repo": "example.com/acme/none", "pattern": "x"}
        for _ in range(BURST):
            assert (await client.post("/api/grep", json=body)).status_code == 404
        # Not JSON at all: within the allowance this is a 400; past it, the 429 comes first
        # (the body is never read, let alone parsed or validated).
        broken = await client.post(
            "/api/grep", content=b"{not json", headers={"content-type": "application/json"}
        )
        _assert_limited(broken, "grep")
        metrics = await stack.scrape()
    # Refused in the middleware, and still counted under its route.
    assert 'route="/api/grep",status="429"' in metrics, metrics


async def test_a_revoked_key_is_refused_at_once_though_it_was_seen_lately(stack: Stack) -> None:
    store = KeysStore(stack.gateway.pool)
    record, secret = await store.create("revoked-soon", "revoked-soon", False)
    async with stack.client(secret) as client:
        assert (await _search(client, "retry budget")).status_code == 200  # remembered now
        await store.revoke(record.id)
        # The key has tokens left, so the request is admitted only after the database
        # lookup, which no longer finds it: the memory of recent keys never admits.
        reply = await _search(client, "retry budget")
    assert reply.status_code == 401, reply.text
    assert reply.json()["error"] == "unauthenticated"

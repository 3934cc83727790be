"""Request limits at their edges over a real gateway socket, REST and MCP alike: a value at
the limit passes, one past it is a 400 (or an MCP error) naming the field; bodies over the
byte limit get 413 whether they declare their length or arrive chunked; text that is not
UTF-8 gets 400 instead of being silently replaced; authors cannot vote on their own notes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio

from cograph_api import limits
from tests.integration.support.mcp_client import call, http_client
from tests.integration.support.stacks import Stack, gateway_stack

pytestmark = pytest.mark.asyncio(loop_scope="session")

MAX_BODY = limits.REQUEST_BODY_MAX_BYTES  # the stack runs with the default limit


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        tmp_path_factory.mktemp("gw-limits"),
        services=("commons", "retrieval", "router"),
    ) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def alice(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with stack.client(await stack.key("alice")) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def bob(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with stack.client(await stack.key("bob")) as client:
        yield client


def _refused(reply: httpx.Response, field: str) -> None:
    assert reply.status_code == 400, reply.text
    body = reply.json()
    assert body["error"] == "invalid_argument", body
    assert field in body["detail"], body


# ---- raw HTTP: what httpx would not send ---------------------------------------------------


async def _raw(stack: Stack, key: str, head: str, chunks: list[bytes]) -> tuple[int, Any]:
    """Sends `head` and then `chunks` on a plain socket; returns the status and JSON body."""
    url = urlsplit(stack.url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(head.replace("{key}", key).encode("latin-1"))
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 60)
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers["content-length"]))
        return int(status_line.split()[1]), json.loads(body)
    finally:
        writer.close()


def _chunked(payload: bytes, size: int = 1 << 20) -> list[bytes]:
    parts = [payload[i : i + size] for i in range(0, len(payload), size)]
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]


def _post_head(path: str, extra: str) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {{key}}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    )


def _padded_post(size: int) -> bytes:
    """A valid note whose JSON is exactly `size` bytes (padded with insignificant spaces)."""
    core = json.dumps({"title": "padded", "body": "a note padded with whitespace"}).encode()
    return core[:-1] + b" " * (size - len(core)) + b"}"


async def test_chunked_body_over_the_limit_is_413(stack: Stack) -> None:
    key = await stack.key("alice")
    payload = _padded_post(18 * 1024 * 1024)  # the 18 MiB body that used to get 400
    status, body = await _raw(
        stack, key, _post_head("/v1/posts", "Transfer-Encoding: chunked\r\n"), _chunked(payload)
    )
    assert (status, body["error"]) == (413, "payload_too_large"), body


async def test_chunked_body_at_the_limit_passes_and_one_byte_more_is_413(stack: Stack) -> None:
    key = await stack.key("alice")
    head = _post_head("/v1/posts", "Transfer-Encoding: chunked\r\n")
    status, body = await _raw(stack, key, head, _chunked(_padded_post(MAX_BODY)))
    assert status == 201 and body["title"] == "padded", body
    status, body = await _raw(stack, key, head, _chunked(_padded_post(MAX_BODY + 1)))
    assert (status, body["error"]) == (413, "payload_too_large"), body


async def test_declared_body_over_the_limit_is_413(stack: Stack) -> None:
    key = await stack.key("alice")
    payload = _padded_post(MAX_BODY + 1)
    head = _post_head("/v1/posts", f"Content-Length: {len(payload)}\r\n")
    status, body = await _raw(stack, key, head, [payload])
    assert (status, body["error"]) == (413, "payload_too_large"), body


async def test_streamed_body_over_the_limit_is_413(alice: httpx.AsyncClient) -> None:
    async def stream() -> AsyncIterator[bytes]:
        yield b'{"title": "t", "body": "'
        for _ in range(17):
            yield b"x" * (1 << 20)
        yield b'"}'

    reply = await alice.post(
        "/api/search", content=stream(), headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413 and reply.json()["error"] == "payload_too_large"


# ---- UTF-8 ---------------------------------------------------------------------------------


async def test_query_string_that_is_not_utf8_is_400(alice: httpx.AsyncClient) -> None:
    reply = await alice.get("/v1/search?q=%FF")
    _refused(reply, "'q'")
    assert "UTF-8" in reply.json()["detail"]
    # Properly encoded text is searched as sent (é is %C3%A9).
    ok = await alice.get("/v1/search?q=caf%C3%A9")
    assert ok.status_code == 200 and ok.json()["query"] == "café", ok.text


async def test_path_that_is_not_utf8_is_400(alice: httpx.AsyncClient) -> None:
    _refused(await alice.get("/v1/posts/%FF%FE"), "path")


async def test_json_body_that_is_not_utf8_is_400(stack: Stack, alice: httpx.AsyncClient) -> None:
    bad = b'{"title": "caf\xe9", "body": "latin-1, not UTF-8"}'
    reply = await alice.post("/v1/posts", content=bad, headers={"content-type": "application/json"})
    _refused(reply, "body")
    assert "UTF-8" in reply.json()["detail"]
    key = await stack.key("alice")
    status, body = await _raw(
        stack, key, _post_head("/v1/posts", "Transfer-Encoding: chunked\r\n"), _chunked(bad, 7)
    )
    assert status == 400 and "UTF-8" in body["detail"], body


# ---- limits at their edges, REST -----------------------------------------------------------


async def test_commons_limits_over_rest(alice: httpx.AsyncClient) -> None:
    ok = await alice.post(
        "/v1/posts",
        json={
            "title": "t" * limits.POST_TITLE_MAX_CHARS,
            "body": "b" * limits.POST_BODY_MAX_CHARS,
            "tags": [f"{i}" * limits.TAG_MAX_CHARS for i in range(limits.POST_TAGS_MAX)],
        },
    )
    assert ok.status_code == 201, ok.text
    post_id = ok.json()["id"]
    for field, value in (
        ("title", "t" * (limits.POST_TITLE_MAX_CHARS + 1)),
        ("body", "b" * (limits.POST_BODY_MAX_CHARS + 1)),
        ("tags", [f"t{i}" for i in range(limits.POST_TAGS_MAX + 1)]),
        ("tags", ["x" * (limits.TAG_MAX_CHARS + 1)]),
    ):
        note = {"title": "t", "body": "b", field: value}
        _refused(await alice.post("/v1/posts", json=note), field)

    comment = "c" * limits.COMMENT_MAX_CHARS
    added = await alice.post(f"/v1/posts/{post_id}/comments", json={"body": comment})
    assert added.status_code == 201, added.text
    too_long = await alice.post(f"/v1/posts/{post_id}/comments", json={"body": comment + "c"})
    _refused(too_long, "body")

    q = "q" * limits.COMMONS_QUERY_MAX_CHARS
    assert (await alice.get("/v1/search", params={"q": q})).status_code == 200
    _refused(await alice.get("/v1/search", params={"q": q + "q"}), "q")


async def test_search_and_route_limits_over_rest(alice: httpx.AsyncClient) -> None:
    query = "x" * limits.SEARCH_QUERY_MAX_CHARS
    assert (await alice.post("/api/search", json={"query": query})).status_code == 200
    _refused(await alice.post("/api/search", json={"query": query + "x"}), "query")
    for field, most in (("top_k", limits.TOP_K_MAX), ("snippet_chars", limits.SNIPPET_CHARS_MAX)):
        fine = await alice.post("/api/search", json={"query": "q", field: most})
        assert fine.status_code == 200, fine.text
        _refused(await alice.post("/api/search", json={"query": "q", field: most + 1}), field)

    # The graph's symbol: retrieval itself used to stop at 200 characters, under the 500
    # the schema advertised. At the limit the request reaches the lookup (no such repository).
    symbol = "s" * limits.SYMBOL_MAX_CHARS
    graph = await alice.post("/api/graph", json={"repo": "example.com/no/such", "symbol": symbol})
    assert graph.status_code == 404, graph.text
    too_long = {"repo": "example.com/no/such", "symbol": symbol + "s"}
    _refused(await alice.post("/api/graph", json=too_long), "symbol")

    route = "r" * limits.ROUTE_QUERY_MAX_CHARS
    assert (await alice.post("/api/route", json={"query": route})).status_code == 200
    _refused(await alice.post("/api/route", json={"query": route + "r"}), "query")
    most = limits.ROUTE_RESULTS_MAX
    fine = await alice.post("/api/route", json={"query": "q", "max_repositories": most})
    assert fine.status_code == 200, fine.text
    over = await alice.post("/api/route", json={"query": "q", "max_repositories": most + 1})
    _refused(over, "max_repositories")


# ---- limits at their edges, MCP ------------------------------------------------------------


async def test_limits_over_mcp(stack: Stack) -> None:
    async with http_client(stack, await stack.key("mcp-agent")) as client:
        cases: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
            (
                "commons_post",
                {"title": "t" * limits.POST_TITLE_MAX_CHARS, "body": "b"},
                "title",
                {"title": "t" * (limits.POST_TITLE_MAX_CHARS + 1), "body": "b"},
            ),
            (
                "commons_post",
                {"title": "t", "body": "b" * limits.POST_BODY_MAX_CHARS},
                "body",
                {"title": "t", "body": "b" * (limits.POST_BODY_MAX_CHARS + 1)},
            ),
            (
                "commons_search",
                {"query": "q" * limits.COMMONS_QUERY_MAX_CHARS},
                "query",
                {"query": "q" * (limits.COMMONS_QUERY_MAX_CHARS + 1)},
            ),
            (
                "cograph_search",
                {"query": "q", "top_k": limits.TOP_K_MAX},
                "top_k",
                {"query": "q", "top_k": limits.TOP_K_MAX + 1},
            ),
            (
                "cograph_search",
                {"query": "x" * limits.SEARCH_QUERY_MAX_CHARS},
                "query",
                {"query": "x" * (limits.SEARCH_QUERY_MAX_CHARS + 1)},
            ),
            (
                "cograph_route",
                {"query": "r" * limits.ROUTE_QUERY_MAX_CHARS},
                "query",
                {"query": "r" * (limits.ROUTE_QUERY_MAX_CHARS + 1)},
            ),
        ]
        for tool, at_limit, field, past_limit in cases:
            failed, result = await call(client, tool, at_limit)
            assert not failed, (tool, field, result)
            failed, result = await call(client, tool, past_limit)
            assert failed, (tool, field, result)
            assert result["error"] == "invalid_argument", result
            assert field in result["detail"], result


# ---- self-votes ----------------------------------------------------------------------------


async def test_authors_cannot_vote_on_their_own_notes(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    created = await alice.post("/v1/posts", json={"title": "mine", "body": "my own note"})
    post_id = created.json()["id"]
    for direction in ("up", "down"):
        own = await alice.post(f"/v1/posts/{post_id}/votes", json={"direction": direction})
        assert own.status_code == 403, own.text
        assert own.json()["error"] == "own_post_vote"
        assert "own" in own.json()["detail"]
    # Withdrawing is always allowed (there is nothing to withdraw here); others vote freely.
    withdrawn = await alice.post(f"/v1/posts/{post_id}/votes", json={"direction": "none"})
    assert withdrawn.status_code == 200 and withdrawn.json()["score"] == 0
    other = await bob.post(f"/v1/posts/{post_id}/votes", json={"direction": "up"})
    assert other.status_code == 200 and other.json()["score"] == 1
    assert (await alice.get(f"/v1/posts/{post_id}")).json()["score"] == 1

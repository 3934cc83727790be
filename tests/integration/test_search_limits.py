"""Every request limit at its edges over gRPC: inside passes, one step outside is
INVALID_ARGUMENT (never clamped); unknown or unreadable scopes are NOT_FOUND."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.retrieval import SearchEnv
from tests.integration.support.search_corpus import DEMO, HANDBOOK

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _stamp(year: int, month: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime(year, month, 1, tzinfo=UTC))
    return stamp


async def _code(env: SearchEnv, query: str, **fields: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await env.search(query, **fields)
    return caught.value.code()


@pytest.mark.parametrize("top_k", [0, 101, -1])
async def test_top_k_outside_is_invalid(search_env: SearchEnv, top_k: int) -> None:
    assert await _code(search_env, "ParseConfig", top_k=top_k) == grpc.StatusCode.INVALID_ARGUMENT


async def test_top_k_edges_inside(search_env: SearchEnv) -> None:
    assert len((await search_env.search("config", top_k=1)).results) == 1
    hundred = await search_env.search("a", top_k=100, streams=[pb.STREAM_VECTOR])
    assert 10 < len(hundred.results) <= 100
    default = await search_env.search("a", streams=[pb.STREAM_VECTOR])
    assert len(default.results) == 10


@pytest.mark.parametrize("width", [79, 4001, 0])
async def test_snippet_chars_outside_is_invalid(search_env: SearchEnv, width: int) -> None:
    code = await _code(search_env, "ParseConfig", snippet_chars=width)
    assert code == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("width", [80, 4000])
async def test_snippet_chars_edges_inside(search_env: SearchEnv, width: int) -> None:
    reply = await search_env.search("ParseConfig", snippet_chars=width, top_k=100)
    assert reply.results and all(len(r.snippet) <= width for r in reply.results)
    widest = max(len(r.snippet) for r in reply.results)
    assert widest == width or all(not r.truncated for r in reply.results)


@pytest.mark.parametrize(
    "fields",
    [
        {"query": ""},
        {"query": "   \n\t"},
        {"query": "x" * 4001},
        {"query": "ParseConfig", "layers": [99]},
        {"query": "ParseConfig", "layers": [pb.LAYER_MD_COLLECTION]},
        {"query": "ParseConfig", "collection": HANDBOOK, "layers": [pb.LAYER_CODE]},
        {"query": "ParseConfig", "repo": DEMO, "collection": HANDBOOK},
        {"query": "ParseConfig", "streams": [42]},
        {"query": "ParseConfig", "include_graph": True},
        {"query": "ParseConfig", "since": _stamp(2024, 6), "until": _stamp(2024, 1)},
    ],
    ids=[
        "empty",
        "blank",
        "too-long",
        "unknown-layer",
        "collection-layer-without-collection",
        "code-layer-with-collection",
        "repo-and-collection",
        "unknown-stream",
        "graph-without-repo",
        "since-after-until",
    ],
)
async def test_bad_requests_are_invalid(search_env: SearchEnv, fields: dict[str, Any]) -> None:
    query = fields.pop("query")
    assert await _code(search_env, query, **fields) == grpc.StatusCode.INVALID_ARGUMENT


async def test_equal_since_and_until_is_allowed(search_env: SearchEnv) -> None:
    reply = await search_env.search("ParseConfig", since=_stamp(2024, 3), until=_stamp(2024, 3))
    assert reply.query == "ParseConfig"


async def test_unknown_scopes_are_not_found(search_env: SearchEnv) -> None:
    code = await _code(search_env, "ParseConfig", repo="example.com/no/such")
    assert code == grpc.StatusCode.NOT_FOUND
    assert await _code(search_env, "laptop", collection="nope") == grpc.StatusCode.NOT_FOUND


async def test_query_is_trimmed_and_punctuation_only_skips_lexical(search_env: SearchEnv) -> None:
    reply = await search_env.search("  ParseConfig  ")
    assert reply.query == "ParseConfig"
    symbols = await search_env.search("(*) ->")
    assert symbols.streams.lexical == pb.STREAM_STATUS_SKIPPED
    assert symbols.streams.vector == pb.STREAM_STATUS_OK

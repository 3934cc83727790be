"""Internal calls are authenticated: real retrieval, router, commons and embedder servers on
127.0.0.1 refuse every unsigned or forged call with UNAUTHENTICATED, accept signed ones, and
answer health checks without a token."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph.router.v1 import router_pb2, router_pb2_grpc
from retrieval.app import start_retrieval
from svckit import requestctx
from svckit.clients import dial, signed_metadata
from svckit.internal_auth import AUTH_HEADER, Claims, TokenSigner
from tests.integration.support.generic_host import generic_host
from tests.integration.support.retrieval import retrieval_settings
from tests.integration.support.stacks import Stack, gateway_stack
from tests.internal_auth import SIGNER, TEST_SECRET, signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

SERVICES = ("embedder", "retrieval", "router", "commons")
ROOT = Claims("root", True, "req-root")
ALICE = Claims("alice", False, "req-alice")
Metadata = Sequence[tuple[str, str]]


@dataclasses.dataclass
class Target:
    address: str
    call: Callable[[grpc.aio.Channel, Metadata], Any]  # one cheap RPC that answers OK


def _embedder(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = embedder_pb2_grpc.EmbedderServiceStub(channel)
    return stub.Info(embedder_pb2.InfoRequest(), metadata=metadata, timeout=30)


def _retrieval(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    return stub.ListRepositories(
        retrieval_pb2.ListRepositoriesRequest(), metadata=metadata, timeout=30
    )


def _router(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = router_pb2_grpc.RouterServiceStub(channel)
    return stub.Route(router_pb2.RouteRequest(query="billing"), metadata=metadata, timeout=30)


def _commons(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = commons_pb2_grpc.CommonsServiceStub(channel)
    # A search embeds its query: the commons signs its own call to the embedder.
    return stub.SearchPosts(
        commons_pb2.SearchPostsRequest(query="retry policy"), metadata=metadata, timeout=30
    )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url, embedder_address, tmp_path_factory.mktemp("internal-auth")
    ) as running:
        yield running


@pytest.fixture(scope="module")
def targets(stack: Stack, embedder_address: str) -> dict[str, Target]:
    assert stack.retrieval and stack.router and stack.commons
    return {
        "embedder": Target(embedder_address, _embedder),
        "retrieval": Target(f"127.0.0.1:{stack.retrieval.port}", _retrieval),
        "router": Target(f"127.0.0.1:{stack.router.port}", _router),
        "commons": Target(f"127.0.0.1:{stack.commons.port}", _commons),
    }


def _with(metadata: Metadata, key: str, value: str) -> list[tuple[str, str]]:
    """`metadata` with one header's value replaced after signing."""
    return [(k, value if k == key else v) for k, v in metadata]


def _signed(claims: Claims, signer: TokenSigner = SIGNER) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in signed_metadata(signer, claims)]


ANOTHER_SECRET = TokenSigner(b"another-secret-of-at-least-32-bytes!")
# A signer whose clock is five minutes behind: its tokens expired long ago.
EXPIRED = TokenSigner(TEST_SECRET.encode(), clock=lambda: time.time() - 300)
LONG_LIVED = TokenSigner(TEST_SECRET.encode(), ttl_s=86_400)

FORGERIES: dict[str, tuple[Callable[[], Metadata], str]] = {
    "unsigned admin": (
        lambda: [
            (requestctx.PRINCIPAL_HEADER, "root"),
            (requestctx.ADMIN_HEADER, "1"),
            (requestctx.REQUEST_ID_HEADER, "req-1"),
        ],
        f"missing {AUTH_HEADER}",
    ),
    "unsigned anonymous": (lambda: [], f"missing {AUTH_HEADER}"),
    "another secret": (lambda: _signed(ROOT, ANOTHER_SECRET), "bad token signature"),
    "expired": (lambda: _signed(ROOT, EXPIRED), "expired"),
    "too long-lived": (lambda: _signed(ROOT, LONG_LIVED), "too far in the future"),
    "principal changed": (
        lambda: _with(_signed(ALICE), requestctx.PRINCIPAL_HEADER, "root"),
        "bad token signature",
    ),
    "admin flag raised": (
        lambda: _with(_signed(ALICE), requestctx.ADMIN_HEADER, "1"),
        "bad token signature",
    ),
    "request id changed": (
        lambda: _with(_signed(ROOT), requestctx.REQUEST_ID_HEADER, "another-request"),
        "bad token signature",
    ),
    "garbage token": (lambda: _with(_signed(ROOT), AUTH_HEADER, "not-a-token"), "malformed"),
    "principal sent twice": (
        lambda: [*_signed(ALICE), (requestctx.PRINCIPAL_HEADER, "root")],
        "more than once",
    ),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
@pytest.mark.parametrize("service", SERVICES)
async def test_unsigned_and_forged_calls_are_unauthenticated(
    targets: dict[str, Target], service: str, forgery: str
) -> None:
    make, reason = FORGERIES[forgery]
    target = targets[service]
    async with grpc.aio.insecure_channel(target.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await target.call(channel, make())
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, caught.value
    details = caught.value.details() or ""
    assert details.startswith("unauthenticated internal call: ") and reason in details


@pytest.mark.parametrize("service", SERVICES)
async def test_signed_calls_and_tokenless_health_checks_work(
    targets: dict[str, Target], service: str
) -> None:
    target = targets[service]
    async with grpc.aio.insecure_channel(target.address) as channel:
        await target.call(channel, _signed(ROOT))
        await target.call(channel, _signed(Claims("", False, "req-anonymous")))
        # Kubernetes probes send no metadata at all.
        health: Any = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_refused_call_is_logged_as_unauthenticated(
    targets: dict[str, Target], caplog: pytest.LogCaptureFixture
) -> None:
    target = targets["router"]
    with caplog.at_level(logging.WARNING, logger="svckit.access"):
        async with grpc.aio.insecure_channel(target.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await target.call(channel, FORGERIES["expired"][0]())
    (record,) = [r for r in caplog.records if r.getMessage() == "unauthenticated rpc"]
    fields = record.__dict__
    assert fields["method"] == "/cograph.router.v1.RouterService/Route"
    assert fields["code"] == "UNAUTHENTICATED" and "expired" in fields["reason"]
    assert fields["request_id"] == ROOT.request_id and fields["peer"]


async def test_the_gateway_signs_for_the_key_it_checked(stack: Stack) -> None:
    async with stack.client(stack.admin_key) as client:
        listed = await client.get("/api/repositories")
        routed = await client.post("/api/route", json={"query": "billing"})
    assert listed.status_code == 200, listed.text
    assert routed.status_code == 200, routed.text


async def test_retrieval_signs_its_calls_to_the_embedder(
    targets: dict[str, Target], stack: Stack, embedder_address: str, tmp_path: Path
) -> None:
    search = retrieval_pb2.SearchRequest(query="how are failed charges retried")
    root = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
    async with signed_channel(targets["retrieval"].address) as channel:
        stub: Any = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        reply = await stub.Search(search, metadata=root, timeout=60)
    assert reply.streams.vector == retrieval_pb2.STREAM_STATUS_OK
    # The same service holding another secret: the embedder refuses its calls, so the vector
    # stream is lost (the search still answers from the other streams).
    other = b"a-secret-the-embedder-does-not-share-0123"
    settings = dataclasses.replace(
        retrieval_settings(stack.database_url, tmp_path, embedder_address), internal_secret=other
    )
    app = await start_retrieval(settings)
    try:
        async with dial(f"127.0.0.1:{app.port}", signer=TokenSigner(other)) as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            stray = await stub.Search(search, metadata=root, timeout=60)
    finally:
        await app.stop()
    assert stray.streams.vector == retrieval_pb2.STREAM_STATUS_UNAVAILABLE


# --- streaming methods: none of the services has one yet; the check covers them anyway ----


async def _stream_reply(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    for _ in range(2):
        yield request


async def _collect(requests: AsyncIterator[bytes], context: Any) -> bytes:
    return b"".join([chunk async for chunk in requests])


async def _chat(requests: AsyncIterator[bytes], context: Any) -> Any:
    async for chunk in requests:
        yield chunk


@pytest_asyncio.fixture(loop_scope="session")
async def streaming_host() -> AsyncIterator[str]:
    async with generic_host(
        "test.Streams",
        {
            "Reply": grpc.unary_stream_rpc_method_handler(_stream_reply),
            "Collect": grpc.stream_unary_rpc_method_handler(_collect),
            "Chat": grpc.stream_stream_rpc_method_handler(_chat),
        },
    ) as address:
        yield address


async def _chunks() -> AsyncIterator[bytes]:
    for chunk in (b"a", b"b"):
        yield chunk


async def _late_chunks() -> AsyncIterator[bytes]:
    """Requests sent only after a refusal on the call's metadata has arrived: a message
    written while the server closes the call fails on the client with INTERNAL instead
    (a race of the test, seen on a loaded machine), which would hide the status."""
    await asyncio.sleep(0.5)
    for chunk in (b"a", b"b"):
        yield chunk


def _methods(channel: grpc.aio.Channel) -> tuple[Any, Any, Any]:
    # No serializers: the generic handlers above take and return raw bytes.
    none: Any = None
    return (
        channel.unary_stream("/test.Streams/Reply", none, none),
        channel.stream_unary("/test.Streams/Collect", none, none),
        channel.stream_stream("/test.Streams/Chat", none, none),
    )


async def _streams(channel: grpc.aio.Channel, metadata: Metadata) -> list[bytes]:
    reply, collect, chat = _methods(channel)
    replies = [r async for r in reply(b"x", metadata=metadata)]
    collected = await collect(_chunks(), metadata=metadata)
    chatted = [r async for r in chat(_chunks(), metadata=metadata)]
    return [*replies, collected, *chatted]


async def test_streaming_methods_are_authenticated_too(streaming_host: str) -> None:
    forged = _with(_signed(ALICE), requestctx.ADMIN_HEADER, "1")
    async with grpc.aio.insecure_channel(streaming_host) as channel:
        reply, collect, chat = _methods(channel)
        calls = {
            "unary-stream": lambda: _drain(reply(b"x", metadata=forged)),
            "stream-unary": lambda: collect(_late_chunks(), metadata=forged),
            "stream-stream": lambda: _drain(chat(_late_chunks(), metadata=forged)),
        }
        for kind, call in calls.items():
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call()
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, kind
            assert "bad token signature" in (caught.value.details() or ""), kind
        assert await _streams(channel, _signed(ROOT)) == [b"x", b"x", b"ab", b"a", b"b"]


async def _drain(responses: Any) -> list[bytes]:
    return [r async for r in responses]

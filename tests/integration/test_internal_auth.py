"""Internal calls are authenticated: real retrieval, router, commons and embedder servers on
127.0.0.1 refuse every unsigned or forged call with UNAUTHENTICATED, and every token made
for another method (a captured token replayed), accept signed ones, and answer health
checks without a token."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
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
from svckit import clients, requestctx
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


Call = Callable[[grpc.aio.Channel, Metadata], Any]


@dataclasses.dataclass
class Target:
    address: str
    method: str  # the full name of `call`'s method, which its token is made for
    call: Call  # one cheap RPC that answers OK
    other: Call | None  # another method of the same service (the router has one only)


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


# Other methods of the same services, for replayed tokens: each answers something other
# than UNAUTHENTICATED (a vector, NOT_FOUND) when its token is good.
def _embedder_embed(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = embedder_pb2_grpc.EmbedderServiceStub(channel)
    return stub.Embed(embedder_pb2.EmbedRequest(texts=["x"]), metadata=metadata, timeout=30)


def _retrieval_delete(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = retrieval_pb2_grpc.RetrievalServiceStub(channel)
    return stub.DeleteRepository(
        retrieval_pb2.DeleteRepositoryRequest(slug="no/such/repo"), metadata=metadata, timeout=30
    )


def _commons_get(channel: grpc.aio.Channel, metadata: Metadata) -> Any:
    stub: Any = commons_pb2_grpc.CommonsServiceStub(channel)
    return stub.GetPost(commons_pb2.GetPostRequest(post_id="none"), metadata=metadata, timeout=30)


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
        "embedder": Target(
            embedder_address,
            "/cograph.embedder.v1.EmbedderService/Info",
            _embedder,
            _embedder_embed,
        ),
        "retrieval": Target(
            f"127.0.0.1:{stack.retrieval.port}",
            "/cograph.retrieval.v1.RetrievalService/ListRepositories",
            _retrieval,
            _retrieval_delete,
        ),
        "router": Target(
            f"127.0.0.1:{stack.router.port}",
            "/cograph.router.v1.RouterService/Route",
            _router,
            None,
        ),
        "commons": Target(
            f"127.0.0.1:{stack.commons.port}",
            "/cograph.commons.v1.CommonsService/SearchPosts",
            _commons,
            _commons_get,
        ),
    }


def _with(metadata: Metadata, key: str, value: str) -> list[tuple[str, str]]:
    """`metadata` with one header's value replaced after signing."""
    return [(k, value if k == key else v) for k, v in metadata]


def _signed(claims: Claims, method: str, signer: TokenSigner = SIGNER) -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in signed_metadata(signer, claims, method)]


def _v1_token(claims: Claims) -> list[tuple[str, str]]:
    """A token in the format before tokens named their method, correctly signed with the
    deployment's secret: a token captured before the upgrade must not keep working."""
    expiry = int(time.time()) + 30
    fields = ("v1", claims.principal, "1" if claims.admin else "0", str(expiry), claims.request_id)
    message = b"".join(b"%d:%b" % (len(f.encode()), f.encode()) for f in fields)
    mac = hmac.new(TEST_SECRET.encode(), message, hashlib.sha256).hexdigest()
    return _with(_signed(claims, "/a.B/C"), AUTH_HEADER, f"v1.{expiry}.{mac}")


ANOTHER_SECRET = TokenSigner(b"another-secret-of-at-least-32-bytes!")
# A signer whose clock is five minutes behind: its tokens expired long ago.
EXPIRED = TokenSigner(TEST_SECRET.encode(), clock=lambda: time.time() - 300)
LONG_LIVED = TokenSigner(TEST_SECRET.encode(), ttl_s=86_400)

# Each forgery makes the metadata for a call of the given method.
FORGERIES: dict[str, tuple[Callable[[str], Metadata], str]] = {
    "unsigned admin": (
        lambda _method: [
            (requestctx.PRINCIPAL_HEADER, "root"),
            (requestctx.ADMIN_HEADER, "1"),
            (requestctx.REQUEST_ID_HEADER, "req-1"),
        ],
        f"missing {AUTH_HEADER}",
    ),
    "unsigned anonymous": (lambda _method: [], f"missing {AUTH_HEADER}"),
    "another secret": (lambda m: _signed(ROOT, m, ANOTHER_SECRET), "bad token signature"),
    "expired": (lambda m: _signed(ROOT, m, EXPIRED), "expired"),
    "too long-lived": (lambda m: _signed(ROOT, m, LONG_LIVED), "too far in the future"),
    "principal changed": (
        lambda m: _with(_signed(ALICE, m), requestctx.PRINCIPAL_HEADER, "root"),
        "bad token signature",
    ),
    "admin flag raised": (
        lambda m: _with(_signed(ALICE, m), requestctx.ADMIN_HEADER, "1"),
        "bad token signature",
    ),
    "request id changed": (
        lambda m: _with(_signed(ROOT, m), requestctx.REQUEST_ID_HEADER, "another-request"),
        "bad token signature",
    ),
    "garbage token": (lambda m: _with(_signed(ROOT, m), AUTH_HEADER, "not-a-token"), "malformed"),
    "principal sent twice": (
        lambda m: [*_signed(ALICE, m), (requestctx.PRINCIPAL_HEADER, "root")],
        "more than once",
    ),
    # Made for another method: the service's own health check, or one another service has.
    "made for another method": (
        lambda _method: _signed(ROOT, "/grpc.health.v1.Health/Check"),
        "made for a method other than",
    ),
    # The same method name in another service.
    "made for another service": (
        lambda m: _signed(ROOT, "/cograph.other.v1.OtherService/" + m.rsplit("/", 1)[1]),
        "made for a method other than",
    ),
    "v1 token (no method)": (lambda _method: _v1_token(ROOT), "unsupported token version 'v1'"),
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
            await target.call(channel, make(target.method))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, caught.value
    details = caught.value.details() or ""
    assert details.startswith("unauthenticated internal call: ") and reason in details


@pytest.mark.parametrize("service", SERVICES)
async def test_signed_calls_and_tokenless_health_checks_work(
    targets: dict[str, Target], service: str
) -> None:
    target = targets[service]
    async with grpc.aio.insecure_channel(target.address) as channel:
        await target.call(channel, _signed(ROOT, target.method))
        await target.call(channel, _signed(Claims("", False, "req-anonymous"), target.method))
        # Kubernetes probes send no metadata at all.
        health: Any = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


class _Capture(grpc.aio.UnaryUnaryClientInterceptor):
    """Records the metadata of each call as it leaves, after signing: what a party reading
    pod-to-pod traffic would see."""

    def __init__(self) -> None:
        self.sent: list[list[tuple[str, str]]] = []

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        self.sent.append([(k, str(v)) for k, v in client_call_details.metadata or ()])
        return await continuation(client_call_details, request)


@pytest.mark.parametrize("service", SERVICES)
async def test_a_captured_token_works_only_on_the_method_it_was_made_for(
    targets: dict[str, Target], service: str
) -> None:
    target = targets[service]
    capture = _Capture()
    # Signing first, then the capture: it sees exactly what goes on the wire.
    interceptors: list[Any] = [clients.ContextClientInterceptor(SIGNER, 30.0), capture]
    root = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
    async with grpc.aio.insecure_channel(target.address, interceptors=interceptors) as channel:
        await target.call(channel, root)
    (captured,) = capture.sent
    assert dict(captured)[requestctx.PRINCIPAL_HEADER] == "root"
    # Replayed as it is: the same method still answers (until the token expires) ...
    replays: list[tuple[str, Target, Call]] = []
    if target.other is not None:
        replays.append(("another method of the same service", target, target.other))
    for name in SERVICES:
        if name != service:
            replays.append((f"{name}, another service", targets[name], targets[name].call))
    async with grpc.aio.insecure_channel(target.address) as channel:
        await target.call(channel, captured)
    # ... and everything else refuses it, before any handler runs.
    for what, where, call in replays:
        async with grpc.aio.insecure_channel(where.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(channel, captured)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, (what, caught.value)
        assert "made for a method other than" in (caught.value.details() or ""), what
    # A fresh token for the other method, same claims, is accepted (it is the token that
    # is refused, not the caller).
    if target.other is not None:
        code = grpc.StatusCode.OK
        async with grpc.aio.insecure_channel(target.address, interceptors=interceptors) as ch:
            try:
                await target.other(ch, root)
            except grpc.aio.AioRpcError as err:  # NOT_FOUND for the unknown ids asked for
                code = err.code()
        assert code != grpc.StatusCode.UNAUTHENTICATED


async def test_a_refused_call_is_logged_as_unauthenticated(
    targets: dict[str, Target], caplog: pytest.LogCaptureFixture
) -> None:
    target = targets["router"]
    with caplog.at_level(logging.WARNING, logger="svckit.access"):
        async with grpc.aio.insecure_channel(target.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError):
                await target.call(channel, FORGERIES["expired"][0](target.method))
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


STREAM_METHODS = ("/test.Streams/Reply", "/test.Streams/Collect", "/test.Streams/Chat")


async def _streams(
    channel: grpc.aio.Channel, metadata: Callable[[str], Metadata] = lambda _method: ()
) -> list[bytes]:
    """One call of each streaming method, with the metadata `metadata` makes for it."""
    reply, collect, chat = _methods(channel)
    replies = [r async for r in reply(b"x", metadata=metadata(STREAM_METHODS[0]))]
    collected = await collect(_chunks(), metadata=metadata(STREAM_METHODS[1]))
    chatted = [r async for r in chat(_chunks(), metadata=metadata(STREAM_METHODS[2]))]
    return [*replies, collected, *chatted]


async def test_streaming_methods_are_authenticated_too(streaming_host: str) -> None:
    forged = _with(_signed(ALICE, STREAM_METHODS[0]), requestctx.ADMIN_HEADER, "1")
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
        signed = await _streams(channel, lambda method: _signed(ROOT, method))
        assert signed == [b"x", b"x", b"ab", b"a", b"b"]
        # One token for all three: the one made for Reply is good for Reply only.
        token_for_reply = _signed(ROOT, STREAM_METHODS[0])
        assert [r async for r in reply(b"x", metadata=token_for_reply)] == [b"x", b"x"]
        for other in (
            lambda: collect(_late_chunks(), metadata=token_for_reply),
            lambda: _drain(chat(_late_chunks(), metadata=token_for_reply)),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await other()
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "made for a method other than" in (caught.value.details() or "")


async def test_a_signed_channel_signs_each_streaming_call_for_its_method(
    streaming_host: str,
) -> None:
    """svckit's client interceptor signs streaming calls too, one token per call."""
    async with signed_channel(streaming_host) as channel:
        assert await _streams(channel) == [b"x", b"x", b"ab", b"a", b"b"]


async def _drain(responses: Any) -> list[bytes]:
    return [r async for r in responses]

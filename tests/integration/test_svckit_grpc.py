"""Request ids, JSON logs, OpenTelemetry spans and rich errors across a real client and
server."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cograph_api.embedder_client import EmbedderClient
from embedder.app import start_embedder
from svckit import requestctx
from svckit.clients import dial
from svckit.errors import (
    DATABASE_UNAVAILABLE,
    ERROR_DOMAIN,
    REASON_METADATA_KEY,
    NotFound,
    Unavailable,
    reason_of,
)
from svckit.logs import JsonFormatter
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.generic_host import generic_host
from tests.internal_auth import SIGNER, signed_channel, signed_metadata

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_request_id_and_trace_cross_the_wire(caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = await start_embedder(embedder_settings(), provider)
    channel = dial(f"127.0.0.1:{app.port}", signer=SIGNER, tracer_provider=provider)
    token = requestctx.set_request_id("req-abc-123")
    try:
        with caplog.at_level(logging.INFO, logger="svckit.access"):
            await EmbedderClient(channel, timeout_s=10).embed(["trace me"])
    finally:
        requestctx.reset_request_id(token)
        await channel.close(None)
        await app.stop()

    access = [r for r in caplog.records if r.name == "svckit.access" and r.getMessage() == "rpc"]
    assert access, "the server logs one access line per call"
    line = json.loads(JsonFormatter("embedder").format(access[-1]))
    assert line["method"] == "/cograph.embedder.v1.EmbedderService/Embed"
    assert line["code"] == "OK"
    assert line["request_id"] == "req-abc-123"

    spans = exporter.get_finished_spans()
    client = [s for s in spans if s.kind.name == "CLIENT"]
    server = [s for s in spans if s.kind.name == "SERVER"]
    assert client and server
    assert server[0].context.trace_id == client[0].context.trace_id
    assert server[0].parent is not None and server[0].parent.span_id == client[0].context.span_id


async def test_server_generates_a_request_id_when_none_is_sent(
    caplog: pytest.LogCaptureFixture, embedder_client: EmbedderClient
) -> None:
    with caplog.at_level(logging.INFO, logger="svckit.access"):
        await embedder_client.embed(["no id"])
    record = [r for r in caplog.records if r.name == "svckit.access"][-1]
    line = json.loads(JsonFormatter("embedder").format(record))
    assert len(line["request_id"]) == 32


# --- errors: the reason as a google.rpc.ErrorInfo in grpc-status-details-bin (ADR 0008) ----


async def _fail(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    if request == b"reason":
        raise Unavailable("the embedder is down", reason="semantic_search_unavailable")
    if request == b"database":
        raise asyncpg.QueryCanceledError("canceling statement due to statement timeout")
    raise NotFound("no such post")


@pytest_asyncio.fixture(loop_scope="session")
async def failing_host() -> AsyncIterator[str]:
    """A real svckit host (its interceptors map the errors) whose one method fails."""
    async with generic_host(
        "test.Errors", {"Fail": grpc.unary_unary_rpc_method_handler(_fail)}
    ) as address:
        yield address


async def _failure(address: str, kind: bytes) -> grpc.aio.AioRpcError:
    none: Any = None  # no serializers: the handler takes and returns raw bytes
    async with signed_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await channel.unary_unary("/test.Errors/Fail", none, none)(kind, timeout=10)
    return caught.value


def _error_info(status: Any) -> Any:
    (detail,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


@pytest.mark.parametrize(
    ("kind", "reason", "message"),
    [
        (b"reason", "semantic_search_unavailable", "the embedder is down"),
        (
            b"database",
            DATABASE_UNAVAILABLE,
            "the database cancelled a statement: canceling statement due to statement timeout",
        ),
    ],
)
async def test_an_error_with_a_reason_carries_error_info(
    failing_host: str, kind: bytes, reason: str, message: str
) -> None:
    err = await _failure(failing_host, kind)
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    assert err.details() == message
    # The standard reading: a google.rpc.Status matching the call's code and message.
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    assert (status.code, status.message) == (grpc.StatusCode.UNAVAILABLE.value[0], message)
    info = _error_info(status)
    assert (info.reason, info.domain) == (reason, ERROR_DOMAIN)
    # The legacy trailer, for one release, and the one function the gateway and CLI use.
    trailing: Any = err.trailing_metadata()
    assert (REASON_METADATA_KEY, reason) in list(trailing)
    assert reason_of(err) == reason


async def test_a_synchronous_client_reads_the_error_info(failing_host: str) -> None:
    """What a client that knows nothing of Cograph's trailer does: grpc_status.from_call."""

    def call() -> grpc.RpcError:
        none: Any = None
        with grpc.insecure_channel(failing_host) as channel:
            fail = channel.unary_unary("/test.Errors/Fail", none, none)
            try:
                fail(b"reason", metadata=signed_metadata("/test.Errors/Fail"), timeout=10)
            except grpc.RpcError as err:
                return err
        raise AssertionError("the call succeeded")

    err: Any = await asyncio.to_thread(call)
    assert err.code() == grpc.StatusCode.UNAVAILABLE
    status = rpc_status.from_call(err)
    assert status is not None and status.message == "the embedder is down"
    info = _error_info(status)
    assert (info.reason, info.domain) == ("semantic_search_unavailable", ERROR_DOMAIN)


async def test_an_error_without_a_reason_has_no_details(failing_host: str) -> None:
    err = await _failure(failing_host, b"plain")
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND, "no such post")
    assert rpc_status.from_call(err) is None  # type: ignore[arg-type]
    assert reason_of(err) is None

"""Request ids, JSON logs and OpenTelemetry spans across a real client and server."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cograph_api.embedder_client import EmbedderClient
from embedder.app import start_embedder
from svckit import requestctx
from svckit.clients import dial
from svckit.logs import JsonFormatter
from tests.integration.support.embedders import embedder_settings
from tests.internal_auth import SIGNER

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

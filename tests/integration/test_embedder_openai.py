"""The `openai` embedder backend through the real embedder gRPC service, against a real
HTTP server on 127.0.0.1 that speaks the OpenAI embeddings protocol (POST {base}/embeddings,
{"model", "input": [...]} -> {"data": [{"embedding": [...], "index": i}]})."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import numpy as np
import pytest
import pytest_asyncio

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from cograph_api.embedder_client import EmbedderClient
from embedder.app import EmbedderApp, start_embedder
from embedder.backends import EndpointError, OpenAIBackend
from svckit.config import ConfigError
from tests.integration.support.embedders import embedder_settings
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

DIM = 12
KEY = "sk-test-not-a-real-key"
MODEL = "fake-code-embed-v1"


def fake_vector(text: str) -> list[float]:
    """Deterministic, not normalised (the backend must normalise)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:DIM]]


class FakeEndpoint:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                endpoint.auth.append(self.headers.get("Authorization"))
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "no such route"}})
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self._send(401, {"error": {"message": "bad key"}})
                if any(text == "please fail" for text in body["input"]):
                    return self._send(500, {"error": {"message": "model crashed"}})
                data = [
                    {"object": "embedding", "embedding": fake_vector(t), "index": i}
                    for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the protocol orders by `index`, not by position
                self._send(200, {"object": "list", "data": data, "model": body["model"]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for the loop's next poll: 0.5 s by default.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def openai_embedder(endpoint: FakeEndpoint) -> AsyncIterator[EmbedderApp]:
    app = await start_embedder(
        embedder_settings(
            EMBEDDER_BACKEND="openai",
            EMBEDDER_OPENAI_BASE_URL=endpoint.base_url,
            EMBEDDER_OPENAI_MODEL=MODEL,
            EMBEDDER_OPENAI_API_KEY=KEY,
            EMBEDDER_BATCH_SIZE="3",
        )
    )
    try:
        yield app
    finally:
        await app.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def channel(openai_embedder: EmbedderApp) -> AsyncIterator[grpc.aio.Channel]:
    chan = signed_channel(f"127.0.0.1:{openai_embedder.port}")
    try:
        yield chan
    finally:
        await chan.close(None)


async def test_vectors_come_from_the_endpoint_normalised_in_input_order(
    channel: grpc.aio.Channel, endpoint: FakeEndpoint
) -> None:
    client = EmbedderClient(channel, timeout_s=10.0)
    texts = [f"def handler_{i}(request): ..." for i in range(7)]
    before = len(endpoint.requests)
    vectors = await client.embed(texts)
    assert vectors.shape == (7, DIM)
    for text, row in zip(texts, vectors, strict=True):
        want = np.asarray(fake_vector(text), dtype=np.float32)
        np.testing.assert_allclose(row, want / np.linalg.norm(want), atol=1e-6)
    sent = endpoint.requests[before:]
    # Batches of EMBEDDER_BATCH_SIZE (3), each naming the model, with the bearer key.
    assert sum(len(r["input"]) for r in sent) == 7 and max(len(r["input"]) for r in sent) <= 3
    assert {r["model"] for r in sent} == {MODEL}
    assert set(endpoint.auth[before:]) == {f"Bearer {KEY}"}


async def test_info_reports_the_endpoint_model_and_probed_dimension(
    channel: grpc.aio.Channel,
) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    info = await stub.Info(embedder_pb2.InfoRequest(), timeout=5)
    assert (info.model, info.dimension, info.backend) == (MODEL, DIM, "openai")
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=["x"]), timeout=5)
    assert (reply.model, reply.dimension) == (MODEL, DIM)


async def test_an_endpoint_failure_is_unavailable_without_the_key(
    channel: grpc.aio.Channel,
) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Embed(embedder_pb2.EmbedRequest(texts=["ok", "please fail"]), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "500" in (caught.value.details() or "")
    assert KEY not in (caught.value.details() or "")


async def test_a_configured_dimension_must_match_and_a_bad_key_is_refused(
    endpoint: FakeEndpoint,
) -> None:
    backend = OpenAIBackend(endpoint.base_url, MODEL, KEY, dimension=1024)
    with pytest.raises(EndpointError, match="expected 1024"):
        backend.encode(["x"], 8)
    with pytest.raises(EndpointError, match="401") as caught:
        OpenAIBackend(endpoint.base_url, MODEL, "wrong-key")
    assert "wrong-key" not in str(caught.value)


async def test_the_openai_backend_needs_a_url_and_a_model() -> None:
    with pytest.raises(ConfigError, match="EMBEDDER_OPENAI_BASE_URL"):
        embedder_settings(EMBEDDER_BACKEND="openai", EMBEDDER_OPENAI_MODEL=MODEL)

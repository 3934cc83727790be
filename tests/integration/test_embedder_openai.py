"""The `openai` embedder backend through the real embedder gRPC service, against a real
HTTP server on 127.0.0.1 that speaks the OpenAI embeddings protocol (POST {base}/embeddings,
{"model", "input": [...]} -> {"data": [{"embedding": [...], "index": i}]})."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import grpc
import numpy as np
import pytest
import pytest_asyncio

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from cograph_api.embedder_client import EmbedderClient
from embedder.app import EmbedderApp, start_embedder
from embedder.backends import EndpointError, OpenAIBackend
from svckit.config import ConfigError
from tests.integration.support import openai_fake
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.openai_fake import FakeEmbeddingsEndpoint
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

DIM = 12
KEY = "sk-test-not-a-real-key"
MODEL = "fake-code-embed-v1"


def fake_vector(text: str) -> list[float]:
    return openai_fake.fake_vector(text, DIM)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeEmbeddingsEndpoint]:
    with FakeEmbeddingsEndpoint(DIM, KEY) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def openai_embedder(endpoint: FakeEmbeddingsEndpoint) -> AsyncIterator[EmbedderApp]:
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
    channel: grpc.aio.Channel, endpoint: FakeEmbeddingsEndpoint
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
    endpoint: FakeEmbeddingsEndpoint,
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

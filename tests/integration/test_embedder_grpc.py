"""The real embedder over real gRPC on 127.0.0.1:0."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from cograph_api.embedder_client import EmbedderClient, EmbedderUnavailable
from embedder.app import start_embedder
from svckit.errors import InvalidArgument
from tests.integration.support.embedders import embedder_settings
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_vectors_are_384_dim_and_unit_norm(embedder_client: EmbedderClient) -> None:
    vectors = await embedder_client.embed(["def parse_config(path): ...", "billing retries"])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


async def test_close_texts_score_higher_than_unrelated(embedder_client: EmbedderClient) -> None:
    query, close, far = await embedder_client.embed(
        [
            "how does billing retry a failed charge",
            "retry the payment charge with exponential backoff when the card is declined",
            "render the settings page sidebar with a dark theme",
        ]
    )
    assert float(query @ close) > float(query @ far) + 0.1


async def test_order_is_preserved_within_a_batch(embedder_client: EmbedderClient) -> None:
    texts = ["a" * n for n in (300, 5, 120, 1)]
    batch = await embedder_client.embed(texts)
    singles = [await embedder_client.embed_one(t) for t in texts]
    for row, single in zip(batch, singles, strict=True):
        assert float(row @ single) > 0.999


async def test_concurrent_callers_get_their_own_vectors(embedder_client: EmbedderClient) -> None:
    texts = [f"function number {i} parses config file {i}" for i in range(24)]
    expected = await embedder_client.embed(texts)
    got = await asyncio.gather(*(embedder_client.embed_one(t) for t in texts))
    for want, have in zip(expected, got, strict=True):
        assert float(want @ have) > 0.999


@pytest.mark.parametrize(
    ("texts", "needle"),
    [
        ([], "must not be empty"),
        (["x"] * 257, "max_batch_texts 256"),
        (["x" * 16385], "max_text_chars 16384"),
    ],
)
async def test_bad_batches_are_invalid_argument(
    embedder_address: str, texts: list[str], needle: str
) -> None:
    async with signed_channel(embedder_address) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in (caught.value.details() or "")


async def test_limits_at_their_edges_are_accepted(embedder_client: EmbedderClient) -> None:
    vectors = await embedder_client.embed(["x"] * 256)
    assert vectors.shape == (256, 384)
    (vector,) = await embedder_client.embed(["y" * 16384])
    assert vector.shape == (384,)


async def test_client_maps_invalid_argument(embedder_client: EmbedderClient) -> None:
    with pytest.raises(InvalidArgument):
        await embedder_client.embed([])


async def test_deadline_shorter_than_the_work(embedder_address: str) -> None:
    texts = [f"a long text about parsing configuration number {i} " * 40 for i in range(256)]
    async with signed_channel(embedder_address) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Embed(embedder_pb2.EmbedRequest(texts=texts), timeout=0.05)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_client_raises_unavailable_when_nothing_listens() -> None:
    channel = signed_channel("127.0.0.1:1")
    try:
        with pytest.raises(EmbedderUnavailable):
            await EmbedderClient(channel, timeout_s=0.5).embed(["hello"])
    finally:
        await channel.close(None)


async def test_info_describes_model(embedder_client: EmbedderClient) -> None:
    info = await embedder_client.info()
    assert info.dimension == 384
    assert info.model == "all-MiniLM-L6-v2"
    assert info.backend == "onnx-int8"
    assert info.max_batch_texts == 256


async def test_health_serving_then_not_serving_on_shutdown() -> None:
    app = await start_embedder(embedder_settings())
    async with signed_channel(f"127.0.0.1:{app.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        name = "cograph.embedder.v1.EmbedderService"
        reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(service=name), timeout=10)
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(app.stop())
        second = await watch.read()
        assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
        await stopping

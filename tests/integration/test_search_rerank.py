"""Reranking end to end over real gRPC: the local cross-encoder in the embedder (a tiny
random model built here -- its scores mean nothing, only the code path is tested), a vendor
provider against a local fake of its documented API, the gate, and degradation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from embedder.app import EmbedderApp, start_embedder
from tests.integration.support.embedders import embedder_settings
from tests.integration.support.retrieval import SearchEnv, serving
from tests.integration.support.search_corpus import DEMO
from tests.internal_auth import signed_channel
from tests.rerank_fakes import API_KEY, fake_vendor, overlap
from tests.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.asyncio(loop_scope="session")

RERANK_ON = {"RETRIEVAL_RERANK_ENABLED": "true", "RETRIEVAL_RERANK_THRESHOLD": "1"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def reranking_embedder(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[EmbedderApp]:
    model = build_tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-cross-encoder")
    app = await start_embedder(embedder_settings(EMBEDDER_RERANKER_PATH=str(model)))
    try:
        yield app
    finally:
        await app.stop()


async def test_embedder_rerank_rpc(reranking_embedder: EmbedderApp, embedder_address: str) -> None:
    async with signed_channel(f"127.0.0.1:{reranking_embedder.port}") as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        info = await stub.Info(embedder_pb2.InfoRequest(), timeout=5)
        assert info.reranker == "tiny-cross-encoder"
        docs = ["retry a failed charge", "open the vault", "parse config"]
        reply = await stub.Rerank(
            embedder_pb2.RerankRequest(query="billing retry", documents=docs), timeout=10
        )
        again = await stub.Rerank(
            embedder_pb2.RerankRequest(query="billing retry", documents=docs), timeout=10
        )
        assert len(reply.scores) == 3 and list(reply.scores) == list(again.scores)
        assert reply.model == "tiny-cross-encoder"
        for bad in (
            embedder_pb2.RerankRequest(query=" ", documents=docs),
            embedder_pb2.RerankRequest(query="q", documents=[]),
            embedder_pb2.RerankRequest(query="q", documents=["x" * 20000]),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Rerank(bad, timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The default embedder has no cross-encoder.
    async with signed_channel(embedder_address) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        assert (await stub.Info(embedder_pb2.InfoRequest(), timeout=5)).reranker == ""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Rerank(embedder_pb2.RerankRequest(query="q", documents=["d"]), timeout=5)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_local_cross_encoder_reranks_through_the_embedder(
    search_env: SearchEnv, reranking_embedder: EmbedderApp
) -> None:
    address = f"127.0.0.1:{reranking_embedder.port}"
    env = {**RERANK_ON, "RETRIEVAL_RERANK_PROVIDER": "local_cross_encoder"}
    async with serving(search_env.db_url, search_env.data_dir, address, **env) as (app, stub):
        assert app.reranker is not None and app.reranker.name == "local_cross_encoder"
        reply = await search_env.search("billing retry failed charge", stub=stub, top_k=20)
        scored = [r for r in reply.results if r.HasField("rerank_score")]
        assert scored and scored == list(reply.results[: len(scored)])
        values = [r.rerank_score for r in scored]
        assert values == sorted(values, reverse=True)
        assert "rerank" in reply.timings_ms
        # Gate: an exact symbol at the top is never reranked; nor is an opted-out request.
        exact = await search_env.search("ParseConfig", stub=stub, repo=DEMO)
        assert exact.results[0].qualified_name.endswith("ParseConfig")
        assert not any(r.HasField("rerank_score") for r in exact.results)
        skipped = await search_env.search("billing retry", stub=stub, skip_rerank=True)
        assert not any(r.HasField("rerank_score") for r in skipped.results)


async def test_local_cross_encoder_without_a_model_degrades_to_none(
    search_env: SearchEnv,
) -> None:
    env = {**RERANK_ON, "RETRIEVAL_RERANK_PROVIDER": "local_cross_encoder"}
    async with serving(search_env.db_url, search_env.data_dir, search_env.embedder_addr, **env) as (
        app,
        stub,
    ):
        assert app.reranker is None
        reply = await search_env.search("billing retry", stub=stub)
        assert reply.results and not any(r.HasField("rerank_score") for r in reply.results)


async def test_vendor_provider_reranks_and_failures_keep_the_fused_order(
    search_env: SearchEnv,
) -> None:
    with fake_vendor("cohere") as fake:
        env = {
            **RERANK_ON,
            "RETRIEVAL_RERANK_PROVIDER": "cohere",
            "RETRIEVAL_RERANK_URL": fake.url,
            "RETRIEVAL_RERANK_API_KEY": API_KEY,
            "RETRIEVAL_RERANK_TOP_N": "10",
        }
        async with serving(
            search_env.db_url, search_env.data_dir, search_env.embedder_addr, **env
        ) as (_, stub):
            query = "billing retry failed charge"
            fused = await search_env.search(query, stub=stub, top_k=30, skip_rerank=True)
            reply = await search_env.search(query, stub=stub, top_k=30)
            head = reply.results[:10]
            assert all(r.HasField("rerank_score") for r in head)
            assert not any(r.HasField("rerank_score") for r in reply.results[10:])
            assert [r.rerank_score for r in head] == sorted(
                (r.rerank_score for r in head), reverse=True
            )
            # The window is the fused top 10, reordered; the tail keeps the fused order.
            assert {r.id + str(r.layer) for r in head} == {
                r.id + str(r.layer) for r in fused.results[:10]
            }
            assert [r.id for r in reply.results[10:]] == [r.id for r in fused.results[10:]]
            # The score agrees with the reranked order (a client may re-sort on it).
            scores = [r.score for r in reply.results]
            assert scores == sorted(scores, reverse=True)
            sent = fake.requests[-1]["body"]
            assert sent["query"] == query and len(sent["documents"]) == 10
            # Each score is the fake's overlap for the document sent at its fused position.
            sent_order = [(r.id, r.layer) for r in fused.results[:10]]
            for result in head:
                document = sent["documents"][sent_order.index((result.id, result.layer))]
                assert result.rerank_score == pytest.approx(overlap(query, document))

            # An exact symbol match anywhere -- any case, or a dotted suffix of the
            # qualified name -- skips reranking: the pinned match stays first.
            for named in ("parseconfig", "ParseConfig.validate"):
                exact = await search_env.search(named, stub=stub, top_k=30)
                assert exact.results[0].qualified_name.lower().endswith(named.lower())
                assert not any(r.HasField("rerank_score") for r in exact.results)
            calls = len(fake.requests)
            await search_env.search("ParseConfig.validate", stub=stub, top_k=30)
            assert len(fake.requests) == calls

            fake.fail_with = 500
            failed = await search_env.search(query, stub=stub, top_k=30)
            assert [r.id for r in failed.results] == [r.id for r in fused.results]
            assert not any(r.HasField("rerank_score") for r in failed.results)


async def test_below_threshold_is_not_reranked(search_env: SearchEnv) -> None:
    with fake_vendor("jina") as fake:
        env = {
            "RETRIEVAL_RERANK_ENABLED": "true",
            "RETRIEVAL_RERANK_THRESHOLD": "100000",
            "RETRIEVAL_RERANK_PROVIDER": "jina",
            "RETRIEVAL_RERANK_URL": fake.url,
            "RETRIEVAL_RERANK_API_KEY": API_KEY,
        }
        async with serving(
            search_env.db_url, search_env.data_dir, search_env.embedder_addr, **env
        ) as (_, stub):
            reply = await search_env.search("billing retry", stub=stub)
        assert reply.results and not any(r.HasField("rerank_score") for r in reply.results)
        assert fake.requests == []

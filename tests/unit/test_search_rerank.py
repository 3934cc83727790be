"""The rerank gate and the vendor clients against local fake servers
that follow each vendor's documented request and response formats."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from retrieval.search.rerank import (
    CohereReranker,
    JinaReranker,
    RerankError,
    VoyageReranker,
    build_reranker,
    exact_symbol_match,
    should_rerank,
)
from retrieval.search.search_settings import RerankSettings
from svckit.config import Env
from tests.rerank_fakes import API_KEY, fake_vendor

ON = replace(RerankSettings.from_env(Env({})), enabled=True, threshold=50)
DOCS = ["refunds by support", "retry a failed charge with backoff", "charge the card"]


def test_gate_follows_the_spec() -> None:
    assert should_rerank(ON, "billing retry", 50, False)
    assert not should_rerank(replace(ON, enabled=False), "billing retry", 500, False)
    assert not should_rerank(ON, "   ", 500, False)  # blank query
    assert not should_rerank(ON, "billing retry", 49, False)  # below the threshold
    assert not should_rerank(ON, "ParseConfig", 500, True)  # an exact symbol match
    assert should_rerank(replace(ON, threshold=0), "x", 0, False)


def test_exact_symbol_match_is_name_or_qualified_name() -> None:
    assert exact_symbol_match("ParseConfig", "pkg.config.ParseConfig", "ParseConfig")
    assert exact_symbol_match(" pkg.config.ParseConfig ", "pkg.config.ParseConfig", "ParseConfig")
    # Case does not matter, and a dotted suffix names the node as the symbol stream says.
    assert exact_symbol_match("parseconfig", "pkg.config.ParseConfig", "ParseConfig")
    assert exact_symbol_match("RetryPolicy.delay", "billing.RetryPolicy.delay", "delay")
    assert exact_symbol_match("config::ParseConfig", "pkg.config.ParseConfig", "ParseConfig")
    assert not exact_symbol_match("Policy.delay", "billing.RetryPolicy.delay", "delay")
    assert not exact_symbol_match("ParseConfig load", "pkg.config.ParseConfig", "ParseConfig")
    assert not exact_symbol_match("", "", "")


@pytest.mark.parametrize(
    ("vendor", "cls"),
    [("cohere", CohereReranker), ("voyage", VoyageReranker), ("jina", JinaReranker)],
)
async def test_vendor_clients_follow_the_documented_format(vendor: str, cls: type) -> None:
    with fake_vendor(vendor) as fake:
        client = cls(fake.url, API_KEY, "model-x", 5.0)
        try:
            scores = await client.score("retry failed charge", DOCS)
            # Back in input order, whatever order the vendor sorted them in.
            assert scores == pytest.approx([0.0, 1.0, 1 / 3])
            sent = fake.requests[-1]
            assert sent["auth"] == f"Bearer {API_KEY}"
            body = sent["body"]
            assert body["query"] == "retry failed charge" and body["documents"] == DOCS
            assert body["model"] == "model-x"
            assert body.get("top_k" if vendor == "voyage" else "top_n") == len(DOCS)
            assert await client.score("anything", []) == []

            fake.fail_with = 503
            with pytest.raises(RerankError):
                await client.score("retry", DOCS)
            fake.fail_with = None
            fake.garbage = True
            with pytest.raises(RerankError):
                await client.score("retry", DOCS)
        finally:
            await client.close()


async def test_wrong_key_is_an_error() -> None:
    with fake_vendor("cohere") as fake:
        client = CohereReranker(fake.url, "wrong", "m", 5.0)
        with pytest.raises(RerankError):
            await client.score("q", DOCS)
        await client.close()


async def test_unreachable_vendor_is_an_error() -> None:
    client = JinaReranker("http://127.0.0.1:1", API_KEY, "m", 1.0)
    with pytest.raises(RerankError):
        await client.score("q", DOCS)
    await client.close()


def test_providers_that_cannot_be_built_degrade_to_none(caplog: pytest.LogCaptureFixture) -> None:
    env = {"RETRIEVAL_RERANK_ENABLED": "true"}
    with caplog.at_level(logging.WARNING, logger="retrieval.search.rerank"):
        keyless = RerankSettings.from_env(Env({**env, "RETRIEVAL_RERANK_PROVIDER": "cohere"}))
        assert build_reranker(keyless, None) is None
        local = RerankSettings.from_env(
            Env({**env, "RETRIEVAL_RERANK_PROVIDER": "local_cross_encoder"})
        )
        assert build_reranker(local, None) is None
        bad_url = RerankSettings.from_env(
            Env(
                {
                    **env,
                    "RETRIEVAL_RERANK_PROVIDER": "voyage",
                    "RETRIEVAL_RERANK_API_KEY": "k",
                    "RETRIEVAL_RERANK_URL": "ftp://nowhere",
                }
            )
        )
        assert build_reranker(bad_url, None) is None
    assert sum("reranker could not be built" in r.getMessage() for r in caplog.records) == 3
    none = RerankSettings.from_env(Env({}))
    assert build_reranker(none, None) is None


def test_vendor_defaults() -> None:
    cohere = RerankSettings.from_env(Env({"RETRIEVAL_RERANK_PROVIDER": "cohere"}))
    assert cohere.base_url == "https://api.cohere.com" and cohere.model == "rerank-v3.5"
    voyage = RerankSettings.from_env(Env({"RETRIEVAL_RERANK_PROVIDER": "voyage"}))
    assert voyage.base_url == "https://api.voyageai.com"
    jina = RerankSettings.from_env(
        Env({"RETRIEVAL_RERANK_PROVIDER": "jina", "RETRIEVAL_RERANK_MODEL": "jina-m0"})
    )
    assert jina.base_url == "https://api.jina.ai" and jina.model == "jina-m0"
    built = build_reranker(replace(cohere, api_key="k"), None)
    assert isinstance(built, CohereReranker)

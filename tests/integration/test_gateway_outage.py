"""Outages seen through the gateway: the embedder down behind the commons (503
semantic_search_unavailable, never a keyword fallback, and /readyz degraded while searches
lose their vector), a backend down (/readyz 503) and the
embedder down behind search (/readyz degraded, degraded answers counted)."""

from __future__ import annotations

import pytest

from tests.integration.support.faults import free_port
from tests.integration.support.stacks import gateway_stack, metric_value

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_dead_embedder_is_503_semantic_search_unavailable_and_readyz_flips(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with (
        gateway_stack(
            pg_server_url,
            embedder_address,
            tmp_path_factory.mktemp("gw-outage"),
            commons_embedder=dead,
            services=("commons",),
        ) as stack,
        stack.client(await stack.key("alice")) as alice,
        stack.client() as anon,
    ):
        # Posting never waits for the embedder.
        posted = await alice.post("/v1/posts", json={"title": "t", "body": "b"})
        assert posted.status_code == 201, posted.text
        assert posted.json()["searchable"] is False

        reply = await alice.get("/v1/search", params={"q": "anything at all"})
        assert reply.status_code == 503, reply.text
        assert reply.json()["error"] == "semantic_search_unavailable"
        assert reply.json()["detail"]

        # Every dependency answers, but searches just lost their query vector: degraded,
        # still 200 (issue 28: it said ready while searches were failing), and counted.
        ready = await anon.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "degraded"
        assert ready.json()["degraded"] == ["search"]
        assert ready.json()["dependencies"] == {
            "commons": "serving",
            "database": "serving",
            "search": "vector_stream_unavailable",
        }
        assert "1 note searches 503 semantic_search_unavailable" in ready.json()["detail"]
        scrape = await stack.scrape()
        assert metric_value(scrape, "cograph_gateway_semantic_search_unavailable_total") == 1
        assert (
            metric_value(scrape, "cograph_gateway_searches_without_vector_recent", kind="notes")
            == 1
        )
        # Routes of a backend that is not configured answer 503, not 500.
        missing = await alice.get("/api/repositories")
        assert missing.status_code == 503 and missing.json()["error"] == "unavailable"

        assert stack.commons is not None
        await stack.commons.stop()
        down = await anon.get("/readyz")
        assert down.status_code == 503
        assert down.json()["error"] == "unavailable"
        assert down.json()["status"] == "not_ready"
        assert down.json()["dependencies"]["commons"] != "serving"
        gone = await alice.get(f"/v1/posts/{posted.json()['id']}")
        assert gone.status_code == 503 and gone.json()["error"] == "unavailable"


async def test_embedder_down_is_degraded_not_unready_and_degraded_answers_are_counted(
    pg_server_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with (
        gateway_stack(
            pg_server_url,
            dead,  # retrieval and the commons have no embedder
            tmp_path_factory.mktemp("gw-degraded"),
            services=("retrieval", "commons"),
            EMBEDDER_ADDR=dead,  # the gateway probes it for /readyz
        ) as stack,
        stack.client(await stack.key("alice")) as alice,
        stack.client() as anon,
    ):
        ready = await anon.get("/readyz")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "degraded" and body["degraded"] == ["embedder"]
        assert body["dependencies"]["embedder"] != "serving"
        assert body["dependencies"]["retrieval"] == "serving"
        assert body["dependencies"]["database"] == "serving"

        name = "cograph_gateway_degraded_search_answers_total"
        before = metric_value(await stack.scrape(), name, stream="vector")
        # The compact answer names only the streams that failed; the verbose one all of them.
        compact = await alice.post("/api/search", json={"query": "retry a failed charge"})
        assert compact.status_code == 200, compact.text
        assert compact.json()["streams"] == {
            "vector": "unavailable",
            "reasons": {"vector": "embedder_unavailable"},
        }
        verbose = await alice.post(
            "/api/search", json={"query": "retry a failed charge", "verbose": True}
        )
        assert verbose.status_code == 200, verbose.text
        assert verbose.json()["streams"]["vector"] == "unavailable"
        assert verbose.json()["streams"]["lexical"] == "ok"
        after = metric_value(await stack.scrape(), name, stream="vector")
        assert after - before == 2
        assert metric_value(await stack.scrape(), name, stream="lexical") == 0

"""The commons when the embedder is down or slow: posting never waits or fails, search says
UNAVAILABLE (semantic_search_unavailable) within the timeout and never falls back to
keywords, and every note posted during an outage becomes searchable after it."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from svckit.errors import reason_of
from tests.integration.support.commons import commons_settings, running_commons, wait_for
from tests.integration.support.faults import FAST_RECONNECT, TcpProxy, free_port, slow_embedder
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _expect_unavailable(search: asyncio.Future[object] | object, bound_s: float) -> None:
    start = time.perf_counter()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await search  # type: ignore[misc]
    elapsed = time.perf_counter() - start
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(caught.value) == "semantic_search_unavailable"
    assert elapsed < bound_s, f"search took {elapsed:.2f}s, bound {bound_s}s"


async def test_embedder_down_posting_works_search_is_unavailable(fresh_db_url: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    settings = commons_settings(fresh_db_url, dead, EMBEDDER_TIMEOUT_S="0.5")
    async with running_commons(settings) as running:
        start = time.perf_counter()
        post = await running.caller.post("Written during an outage", "Still stored.")
        assert time.perf_counter() - start < 1.0
        assert not (await running.caller.get(post.id)).searchable
        await _expect_unavailable(running.caller.search("outage"), bound_s=2.0)
        # Not even a literal phrase match comes back: there is no keyword fallback.
        await _expect_unavailable(running.caller.search('"Written during"'), bound_s=2.0)


async def test_slow_embedder_is_cut_off_by_the_timeout(fresh_db_url: str) -> None:
    async with slow_embedder(delay_s=30) as (address, servicer):
        settings = commons_settings(
            fresh_db_url, address, EMBEDDER_TIMEOUT_S="0.5", COMMONS_EMBED_WRITE_TIMEOUT_S="1"
        )
        async with running_commons(settings) as running:
            start = time.perf_counter()
            post = await running.caller.post("Slow embedder note", "Posting must not wait.")
            assert time.perf_counter() - start < 1.0
            start = time.perf_counter()
            await _expect_unavailable(running.caller.search("slow"), bound_s=1.5)
            assert time.perf_counter() - start >= 0.45  # it did wait for the timeout
            assert servicer.calls >= 2  # the detached embed and the query both tried
            assert not (await running.caller.get(post.id)).searchable


async def test_notes_posted_during_an_outage_become_searchable_after_it(
    fresh_db_url: str, embedder_address: str
) -> None:
    host, port = embedder_address.rsplit(":", 1)
    proxy = TcpProxy(host, int(port))
    await proxy.start()
    channel = signed_channel(f"127.0.0.1:{proxy.port}", options=FAST_RECONNECT)
    settings = commons_settings(
        fresh_db_url,
        f"127.0.0.1:{proxy.port}",
        EMBEDDER_TIMEOUT_S="1",
        COMMONS_EMBED_WRITE_TIMEOUT_S="2",
        COMMONS_BACKFILL_INTERVAL_S="0.3",
    )
    try:
        async with running_commons(settings, embedder_channel=channel) as running:
            caller = running.caller
            before = await caller.post("Before the outage", "Embedded normally.")
            await caller.wait_searchable(before.id)

            await proxy.cut()
            during = await asyncio.gather(
                *(
                    caller.post(f"Outage note {i}", f"Posted while the embedder was down {i}.")
                    for i in range(20)
                )
            )
            await _expect_unavailable(caller.search("outage note"), bound_s=3.0)
            await asyncio.sleep(1.0)  # several failed backfill passes
            for post in during:
                assert not (await caller.get(post.id)).searchable

            await proxy.restore()

            async def all_searchable() -> bool:
                rows = await running.sql("SELECT count(*) AS c FROM posts WHERE embedding IS NULL")
                return bool(rows[0]["c"] == 0)

            await wait_for(all_searchable, 30, "the backfill to embed every outage note")
            found: set[str] = set()
            for post in during:
                response = await caller.search(f"Outage note {post.title.split()[-1]}")
                found.update(r.id for r in response.results)
            assert {p.id for p in during} <= found
    finally:
        await channel.close(None)
        await proxy.stop()


async def test_start_up_backfill_embeds_what_a_previous_process_left(
    fresh_db_url: str, embedder_address: str
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with running_commons(commons_settings(fresh_db_url, dead)) as first:
        left = [await first.caller.post(f"Left behind {i}", "No vector yet.") for i in range(5)]
    # A fresh process with a working embedder: its start-up pass embeds them all.
    settings = commons_settings(fresh_db_url, embedder_address, COMMONS_BACKFILL_INTERVAL_S="600")
    async with running_commons(settings) as second:
        for post in left:
            await second.caller.wait_searchable(post.id, timeout_s=30)
        hits = {r.id for r in (await second.caller.search("left behind")).results}
        assert {p.id for p in left} <= hits

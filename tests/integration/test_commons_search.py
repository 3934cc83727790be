"""Commons search over real gRPC with the real model: visibility, the ranking formula on
known vectors and votes, quoted phrases, snippets, the limit, two-stage, and the log."""

from __future__ import annotations

import asyncio
import math

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from cograph.commons.v1 import commons_pb2
from cograph_api.embedder_client import EmbedderClient
from commons.ranking import Strategy
from commons.store import configure_filtered, configure_two_stage, search_sql
from tests.integration.support.commons import Running, commons_settings, running_commons, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

UP, DOWN = commons_pb2.VOTE_DIRECTION_UP, commons_pb2.VOTE_DIRECTION_DOWN


def ids(response: commons_pb2.SearchPostsResponse) -> list[str]:
    return [r.id for r in response.results]


async def set_vector(database_url: str, post_id: str, vector: np.ndarray) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await register_vector(conn)
        await conn.execute("UPDATE posts SET embedding = $2 WHERE id = $1::uuid", post_id, vector)
    finally:
        await conn.close()


def at_similarity(query: np.ndarray, similarity: float, seed: int) -> np.ndarray:
    """A unit vector whose cosine similarity to the unit vector `query` is `similarity`."""
    noise = np.random.default_rng(seed).standard_normal(query.shape[0])
    orthogonal = noise - (noise @ query) * query
    orthogonal /= np.linalg.norm(orthogonal)
    vector = similarity * query + math.sqrt(1 - similarity**2) * orthogonal
    return vector.astype(np.float32)


async def test_a_note_is_searchable_once_embedded_and_not_before(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post(
        "Postgres advisory locks serialise migrations",
        "Every replica takes pg_advisory_lock before migrating.",
    )
    await caller.wait_searchable(post.id)
    query = "how do replicas avoid running migrations twice"
    assert post.id in ids(await caller.search(query))
    # As after a crash between insert and embed: the vector is gone, so is the note.
    await commons.sql("UPDATE posts SET embedding = NULL WHERE id = $1::uuid", post.id)
    assert post.id not in ids(await caller.search(query))
    assert not (await caller.get(post.id)).searchable
    # The backfill puts it back (the worker runs every 0.5 s in these tests).
    await caller.wait_searchable(post.id)
    assert post.id in ids(await caller.search(query))


async def test_ranking_formula_on_known_vectors_and_votes(
    commons: Running, embedder_client: EmbedderClient
) -> None:
    caller = commons.caller
    query = "where is the cache eviction policy configured"
    q = (await embedder_client.embed_one(query)).astype(np.float64)
    q /= np.linalg.norm(q)
    shared = at_similarity(q, 0.55, seed=4)  # D, E and F tie exactly on similarity
    plan = {  # name: (vector, votes)
        "A relevant, no votes": (at_similarity(q, 0.80, 1), 0),
        "B fairly relevant, popular": (at_similarity(q, 0.60, 2), 10),
        "C irrelevant, very popular": (at_similarity(q, 0.05, 3), 20),
        "D tied, downvoted": (shared, -5),
        "E tied, no votes": (shared, 0),
        "F tied, no votes, newest": (shared, 0),
        "G slightly less relevant": (at_similarity(q, 0.53, 5), 0),
    }
    posts: dict[str, str] = {}
    for name in plan:  # sequential, so created_at follows this order
        posts[name] = (await caller.post(name, f"body of {name}")).id
    for post_id in posts.values():
        await caller.wait_searchable(post_id)
    for name, (vector, _) in plan.items():
        await set_vector(commons.database_url, posts[name], vector)
    votes = []
    for name, (_, count) in plan.items():
        direction = UP if count > 0 else DOWN
        votes += [caller.vote(posts[name], direction, as_=f"{name}-{i}") for i in range(abs(count))]
    await asyncio.gather(*votes)

    # Hand-computed: score = 1.0 * similarity + 0.15 * ln(1 + max(votes, 0))
    #   B 0.60 + 0.15 ln 11 = 0.9597   A 0.80   F = E = D 0.55 (D's -5 floors at 0)
    #   G 0.53                          C 0.05 + 0.15 ln 21 = 0.5067
    # Ties: score desc (E, F before D), then created_at desc (F before E).
    expected = ["B", "A", "F", "E", "D", "G", "C"]
    response = await caller.search(query)
    got = [r.title[0] for r in response.results]
    assert got == expected
    scores = {r.title[0]: r.score for r in response.results}
    assert (scores["B"], scores["C"], scores["D"]) == (10, 20, -5)


async def test_quoted_phrases_match_literally(commons: Running) -> None:
    caller = commons.caller
    notes = {
        "percent": await caller.post("CPU pinned at 100% during reindex", "Throttle the job."),
        "number": await caller.post("CPU at 1000 MHz during reindex", "100 percent is fine."),
        "snake": await caller.post("Config key", "Use snake_case for config keys."),
        "wild": await caller.post("Config key naming", "Use snakeXcase for config keys."),
        "slash": await caller.post("Windows paths", "Temp files go to C:\\temp\\cograph."),
        "tag": await caller.post("Naming things", "Body without the word.", ["MixedCase"]),
    }
    for post in notes.values():
        await caller.wait_searchable(post.id)

    async def found(query: str) -> set[str]:
        hits = set(ids(await caller.search(query)))
        return {name for name, post in notes.items() if post.id in hits}

    assert await found('reindex "100%"') == {"percent"}
    assert await found('config keys "snake_case"') == {"snake"}
    assert await found('"SNAKE_CASE" naming') == {"snake"}  # case-insensitive
    assert await found('"C:\\temp\\"') == {"slash"}
    assert await found('naming "mixedcase"') == {"tag"}  # tags are searched too
    assert await found('"100%" "snake_case"') == set()  # every phrase is mandatory


async def test_bodies_are_snipped_and_flagged(commons: Running) -> None:
    caller = commons.caller
    long = await caller.post("Long note about gRPC deadlines", "deadline " * 300)  # 2700 chars
    exact = await caller.post("Exact note about gRPC deadlines", "d" * 1200)
    await caller.wait_searchable(long.id)
    await caller.wait_searchable(exact.id)
    results = {r.id: r for r in (await caller.search("gRPC deadlines")).results}
    assert results[long.id].body == ("deadline " * 300)[:1200]
    assert results[long.id].body_truncated and results[long.id].body_chars == 2699
    assert not results[exact.id].body_truncated and results[exact.id].body_chars == 1200
    assert (await caller.get(long.id)).body == ("deadline " * 300).strip()
    result = results[long.id]
    assert not hasattr(result, "similarity") and "similarity" not in str(result)


async def test_results_are_capped_at_the_search_limit(commons: Running) -> None:
    caller = commons.caller
    posts = [await caller.post(f"Retry policy note {i}", f"Retry {i} times.") for i in range(12)]
    for post in posts:
        await caller.wait_searchable(post.id)
    response = await caller.search("retry policy")
    assert response.query == "retry policy"
    assert len(response.results) == 10


async def test_search_is_logged_with_rank_and_score_at(commons: Running) -> None:
    caller = commons.caller
    first = await caller.post("Feature flags live in flags.yaml", "Toggle there.")
    second = await caller.post("Feature flag naming", "Prefix with the team.")
    for post in (first, second):
        await caller.wait_searchable(post.id)
    await caller.vote(first.id, UP, as_="fan")
    response = await caller.search("feature flags", as_="searcher")
    await asyncio.wait_for(_drained(commons), 10)
    (search,) = await commons.sql(
        "SELECT id, query, principal_id, result_count, strategy FROM searches "
        "WHERE principal_id = 'searcher'"
    )
    assert (search["query"], search["result_count"]) == ("feature flags", len(response.results))
    assert search["strategy"] == "exact"
    rows = await commons.sql(
        "SELECT rank, post_id::text, score_at FROM search_results WHERE search_id = $1 "
        "ORDER BY rank",
        search["id"],
    )
    assert [r["post_id"] for r in rows] == ids(response)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    score_at = {r["post_id"]: r["score_at"] for r in rows}
    assert (score_at[first.id], score_at[second.id]) == (1, 0)


async def _drained(commons: Running) -> None:
    """Waits until the best-effort search-log writes have landed."""
    await commons.app.board.log_tasks.drain(timeout_s=10)


async def test_a_failing_log_never_fails_the_search(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("Log failure note", "The search must still answer.")
    await caller.wait_searchable(post.id)
    await commons.sql("DROP TABLE search_results")
    response = await caller.search("log failure")
    assert post.id in ids(response)


async def test_blank_query_is_invalid(commons: Running) -> None:
    import grpc

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await commons.caller.search(' "" ')
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_two_stage_agrees_with_exact_and_uses_the_index(
    fresh_db_url: str, embedder_address: str
) -> None:
    """Threshold 0 forces two-stage; on a small board its top-10 equals the exact scan."""
    # Phrases matching at most 8 notes are scored from their own notes (filtered).
    two_stage_settings = commons_settings(
        fresh_db_url,
        embedder_address,
        COMMONS_TWO_STAGE_THRESHOLD="0",
        COMMONS_FILTER_FIRST_MAX="8",
    )
    exact_settings = commons_settings(
        fresh_db_url, embedder_address, COMMONS_TWO_STAGE_THRESHOLD="1000000"
    )
    # Two replicas on one database: one always two-stage, one always exact.
    async with (
        running_commons(two_stage_settings) as running,
        running_commons(exact_settings) as exact_replica,
    ):
        caller = running.caller
        topics = ["retry", "cache", "auth", "billing", "deploy", "logging"]
        posts = [
            await caller.post(f"{topics[i % 6]} note {i}", f"About {topics[i % 6]}, case {i}%.")
            for i in range(30)
        ]
        await wait_for(lambda: _all_embedded(running, 30), 60, "all notes embedded")
        for i, post in enumerate(posts[:8]):
            await asyncio.gather(*(caller.vote(post.id, UP, as_=f"v{i}-{j}") for j in range(i)))
        # "case 1" is in 11 notes and "%." in all 30 (two-stage); "case 4" in one (filtered).
        for query in ("cache invalidation", 'billing "case 1"', 'retry "%."', 'deploy "case 4"'):
            two_stage = await caller.search(query)
            exact = await exact_replica.caller.search(query)
            assert len(exact.results) == 10 or query != "cache invalidation"
            assert ids(two_stage) == ids(exact), query
        await asyncio.wait_for(_drained(running), 10)
        await asyncio.wait_for(_drained(exact_replica), 10)
        strategies = await running.sql(
            "SELECT strategy, count(*) AS n FROM searches GROUP BY strategy ORDER BY strategy"
        )
        assert [(r["strategy"], r["n"]) for r in strategies] == [
            ("exact", 4),
            ("filtered", 1),
            ("two_stage", 3),
        ]
        plan = await _explain(running.database_url, Strategy.TWO_STAGE, ["%a%"])
        assert "posts_embedding_hnsw" in plan and "posts_haystack_trgm" not in plan
        plan = await _explain(running.database_url, Strategy.FILTERED, ["%case 4%"])
        assert "posts_haystack_trgm" in plan


async def _all_embedded(running: Running, n: int) -> bool:
    (row,) = await running.sql("SELECT count(*) AS c FROM posts WHERE embedding IS NOT NULL")
    return bool(row["c"] == n)


async def _explain(database_url: str, strategy: Strategy, patterns: list[str]) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        await register_vector(conn)
        async with conn.transaction():
            # A 30-row table is cheaper to scan than to probe; forbid the scan to see that
            # each path *can* use its index (at scale the planner picks it by itself).
            await conn.execute("SET LOCAL enable_seqscan = off")
            if strategy is Strategy.TWO_STAGE:
                await configure_two_stage(conn, 100, filtered=bool(patterns))
            else:
                await configure_filtered(conn)
            vector = np.zeros(384, dtype=np.float32)
            vector[0] = 1.0
            k = [100] if strategy is Strategy.TWO_STAGE else []
            rows = await conn.fetch(
                "EXPLAIN " + search_sql(strategy, len(patterns)),
                vector,
                10,
                1200,
                1.0,
                0.15,
                0.1,
                *k,
                *patterns,
            )
        return "\n".join(r[0] for r in rows)
    finally:
        await conn.close()

"""Which nodes the symbol stream admits for a name: a bare name brings every node of that
name; a dotted name (`RetryPolicy.delay`) brings the nodes it names and those similar
enough, never every `delay` in the code base."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from cograph_api.access_rules import Viewer
from retrieval.search import search_sql
from retrieval.search.search_sql import Scope
from retrieval.search.snapshot import on_connection
from tests.integration.support.databases import retrieval_database

pytestmark = pytest.mark.asyncio(loop_scope="session")

NAMES = (
    "billing.retry.RetryPolicy.delay",
    "billing.retry.RetryPolicy.attempts",
    "scheduler.internal.jobs.Worker.delay",
    "net.http.transport.Backoff.delay",
    "ui.animation.timeline.Tween.delay",
    "delay",
)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pool(pg_server_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with retrieval_database(pg_server_url, prefix="names") as (_, pool):
        repository = await pool.fetchval(
            "INSERT INTO repositories (slug, source, source_kind, public) "
            "VALUES ('example.com/n/r', '/dev/null', 'dir', true) RETURNING id"
        )
        await pool.executemany(
            "INSERT INTO code_nodes (repository_id, path, language, qualified_name, name, "
            "kind, start_line, end_line, body, content_hash, tsv) "
            "VALUES ($1, $2, 'python', $3, $4, 'method', 1, 2, 'pass', 'h', ''::tsvector)",
            [
                (repository, f"m{n}.py", qualified, qualified.rsplit(".", 1)[-1])
                for n, qualified in enumerate(NAMES)
            ],
        )
        yield pool


async def _symbol(pool: asyncpg.Pool, text: str) -> list[tuple[str, int]]:
    async with pool.acquire() as conn:
        hits = await search_sql.run_symbol(
            on_connection(conn), "body", Scope(Viewer("reader", False)), text, 100
        )
    return [(hit.span.qualified_name, hit.exact) for hit in hits if hit.span is not None]


async def test_a_dotted_name_does_not_bring_every_member_of_that_name(pool: asyncpg.Pool) -> None:
    hits = await _symbol(pool, "RetryPolicy.delay")
    assert hits[0] == ("billing.retry.RetryPolicy.delay", 3)
    names = {name for name, _ in hits}
    # Its sibling is similar enough to be a candidate; the other `delay`s are not.
    assert "billing.retry.RetryPolicy.attempts" in names
    assert not names & {
        "scheduler.internal.jobs.Worker.delay",
        "net.http.transport.Backoff.delay",
        "ui.animation.timeline.Tween.delay",
    }, hits
    # Case aside, the same.
    assert (await _symbol(pool, "retrypolicy.DELAY"))[0] == ("billing.retry.RetryPolicy.delay", 1)


async def test_a_bare_name_brings_every_node_of_that_name(pool: asyncpg.Pool) -> None:
    hits = await _symbol(pool, "delay")
    delays = [name for name in NAMES if name.rsplit(".", 1)[-1] == "delay"]
    assert sorted(name for name, exact in hits if exact == 3) == sorted(delays)

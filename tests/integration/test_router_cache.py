"""CachedRouterStore against RouterStore (the reference) and against every kind of change.

The cache keeps which sources match a term and which sources a principal may read; these
tests warm it, change the database the way retrieval and the admin API do (revoke a grant,
delete a repository, make one private, publish or re-index terms, truncate), and check that
the very next route already answers as the uncached store does, so that nothing kept can
show a principal a source it can no longer read.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import asyncpg
import pytest
import pytest_asyncio

from cograph_api.access_rules import Viewer
from router.app import open_pool
from router.cache import CachedRouterStore, CacheLimits
from router.store import PoolMatches, RouterStore
from router.terms import QueryTerm, query_terms
from tests.integration.test_router_routing import (
    ADMIN,
    ALICE,
    ANONYMOUS,
    BOB,
    load_fixture,
    router_settings,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

SECRET = "github.com/acme/secret-ledger"
VIEWERS = (ADMIN, ALICE, BOB, ANONYMOUS)
QUERIES = (
    "billing retry stripe",
    "ledger",
    "secret rotation billing",
    "billing.retry.backoff",
    "ledger.retry_queue",
    "RetryQueue",
    "github.com acme",
    "kubernetes terraform",
    "db ops",
    "glossary ledger stripe",
    "nothing-matches-this",
)


@dataclass
class Stores:
    direct: RouterStore
    cached: CachedRouterStore
    writer: asyncpg.Connection

    async def both(
        self, pool: str, viewer: Viewer, terms: Sequence[QueryTerm], limit: int
    ) -> PoolMatches:
        """The cached answer, after checking that it is the uncached one."""
        expected = await getattr(self.direct, pool)(viewer, terms, limit)
        got = await getattr(self.cached, pool)(viewer, terms, limit)
        assert got == expected, (pool, viewer, [t.text for t in terms], limit)
        return got

    async def repositories(self, viewer: Viewer, question: str, limit: int = 20) -> PoolMatches:
        return await self.both("repositories", viewer, query_terms(question, 32), limit)

    async def collections(self, viewer: Viewer, question: str, limit: int = 20) -> PoolMatches:
        return await self.both("collections", viewer, query_terms(question, 32), limit)


async def _stores(url: str, limits: CacheLimits) -> AsyncIterator[Stores]:
    await load_fixture(url)
    pool = await open_pool(router_settings(url))
    writer = await asyncpg.connect(url)
    try:
        yield Stores(RouterStore(pool), CachedRouterStore(pool, limits), writer)
    finally:
        await writer.close()
        await pool.close()


@pytest_asyncio.fixture(loop_scope="session")
async def stores(fresh_db_url: str) -> AsyncIterator[Stores]:
    async for s in _stores(fresh_db_url, CacheLimits(terms=1024, viewers=16)):
        yield s


@pytest_asyncio.fixture(loop_scope="session")
async def tiny_stores(fresh_db_url: str) -> AsyncIterator[Stores]:
    # Fewer kept terms than a question has, and one viewer: every route evicts.
    async for s in _stores(fresh_db_url, CacheLimits(terms=2, viewers=1)):
        yield s


async def _add_repositories(conn: asyncpg.Connection, count: int, seed: int) -> None:
    """Repositories sharing a small vocabulary, so many tie and idf varies across terms."""
    rng = random.Random(seed)
    words = ["billing", "retry", "ledger", "stripe", "queue", "client", "config", "parse"]
    for i in range(count):
        slug = f"example.org/team{i % 7}/{rng.choice(words)}-{i}"
        rid = await conn.fetchval(
            "INSERT INTO repositories (slug, branch, source, source_kind, public) "
            "VALUES ($1, 'main', $1, 'dir', $2) RETURNING id",
            slug,
            rng.random() < 0.6,
        )
        entries = {("label", slug), ("label", slug.rsplit("/", maxsplit=1)[-1])}
        entries |= {("readme", w) for w in rng.sample(words, rng.randint(0, 4))}
        entries |= {
            ("qualified_name", f"{a}.{b}_{c}") for a, b, c in (rng.sample(words, 3) for _ in "ab")
        }
        await conn.executemany(
            "INSERT INTO repository_terms (repository_id, source, term) VALUES ($1, $2, $3)",
            [(rid, source, term) for source, term in entries],
        )
        if rng.random() < 0.3:
            await conn.execute(
                "INSERT INTO grants (principal_id, repository_id) VALUES ('alice', $1)", rid
            )


async def test_equal_to_the_uncached_store_cold_and_warm(stores: Stores) -> None:
    await _add_repositories(stores.writer, 60, seed=5)
    questions = (*QUERIES, "parse_config", "ParseConfig queue", "client config retry")
    for _ in range(2):  # the first round fills the cache, the second reads from it
        for viewer in VIEWERS:
            for question in questions:
                for limit in (1, 3, 20):
                    await stores.repositories(viewer, question, limit)
                    await stores.collections(viewer, question, limit)
    # Collections are answered (fallbacks) even without a term.
    fallback = await stores.both("collections", ALICE, [], 2)
    assert fallback.fallback == ["glossary", "runbooks"]


async def test_bounded_cache_evicts_and_stays_exact(tiny_stores: Stores) -> None:
    await _add_repositories(tiny_stores.writer, 30, seed=9)
    for _ in range(2):
        for question in QUERIES:
            for viewer in VIEWERS:
                await tiny_stores.repositories(viewer, question)
                await tiny_stores.collections(viewer, question)


async def test_revoked_grant_hides_the_source_at_once(stores: Stores) -> None:
    before = await stores.repositories(ALICE, "ledger retry")
    assert SECRET in before.matches
    await stores.writer.execute("DELETE FROM grants WHERE principal_id = 'alice'")
    after = await stores.repositories(ALICE, "ledger retry")
    assert SECRET not in after.matches
    assert after.population == before.population - 1
    collections = await stores.collections(ALICE, "rotation")
    assert "security-policies" not in collections.matches
    assert "security-policies" not in collections.fallback


async def test_uncommitted_revocation_is_not_seen_until_it_commits(stores: Stores) -> None:
    assert SECRET in (await stores.repositories(ALICE, "ledger")).matches
    async with stores.writer.transaction():
        await stores.writer.execute("DELETE FROM grants WHERE principal_id = 'alice'")
        # Other sessions still read the grant, and so does the cache.
        assert SECRET in (await stores.repositories(ALICE, "ledger")).matches
    assert SECRET not in (await stores.repositories(ALICE, "ledger")).matches


async def test_deleted_repository_disappears(stores: Stores) -> None:
    assert SECRET in (await stores.repositories(ADMIN, "ledger")).matches
    await stores.writer.execute("DELETE FROM repositories WHERE slug = $1", SECRET)
    after = await stores.repositories(ADMIN, "ledger")
    assert SECRET not in after.matches
    assert after.population == 3


async def test_made_private_disappears_for_those_without_a_grant(stores: Stores) -> None:
    billing = "github.com/acme/billing"
    assert billing in (await stores.repositories(BOB, "billing")).matches
    await stores.writer.execute("UPDATE repositories SET public = false WHERE slug = $1", billing)
    assert billing not in (await stores.repositories(BOB, "billing")).matches
    assert billing in (await stores.repositories(ADMIN, "billing")).matches
    await stores.writer.execute("UPDATE collections SET public = false WHERE name = 'glossary'")
    assert "glossary" not in (await stores.collections(BOB, "ledger")).matches


async def test_published_and_reindexed_terms_are_reflected(stores: Stores) -> None:
    assert (await stores.repositories(BOB, "websocket")).matches == {}
    await _add_repositories(stores.writer, 1, seed=1)
    rid = await stores.writer.fetchval("SELECT max(id) FROM repositories")
    await stores.writer.execute("UPDATE repositories SET public = true WHERE id = $1", rid)
    await stores.writer.execute(
        "INSERT INTO repository_terms (repository_id, source, term) "
        "VALUES ($1, 'readme', 'websocket')",
        rid,
    )
    assert len((await stores.repositories(BOB, "websocket")).matches) == 1
    # Re-indexing replaces the entries: the old ones stop matching.
    await stores.writer.execute("DELETE FROM repository_terms WHERE repository_id = $1", rid)
    assert (await stores.repositories(BOB, "websocket")).matches == {}
    # A collection's new chunk body matches through the lexemes.
    assert "runbooks" not in (await stores.collections(BOB, "quarterly")).matches
    await stores.writer.execute(
        "INSERT INTO md_collection_chunks (collection_id, path, start_line, end_line, body, "
        "content_hash, tsv) SELECT id, 'q.md', 1, 2, 'quarterly review', 'h', "
        "to_tsvector('english', 'quarterly review') FROM collections WHERE name = 'runbooks'"
    )
    assert "runbooks" in (await stores.collections(BOB, "quarterly")).matches


async def test_truncate_is_a_change_too(stores: Stores) -> None:
    assert SECRET in (await stores.repositories(ALICE, "ledger")).matches
    await stores.writer.execute("TRUNCATE grants")
    assert SECRET not in (await stores.repositories(ALICE, "ledger")).matches


async def test_every_change_raises_the_version_and_bookkeeping_does_not(stores: Stores) -> None:
    async def version(pool: str) -> int:
        value = await stores.writer.fetchval(
            "SELECT coalesce(sum(version), 0) FROM router_versions WHERE pool = $1", pool
        )
        return int(value)

    infra = "(SELECT id FROM repositories WHERE slug = 'gitlab.com/ops/infra')"
    runbooks = "(SELECT id FROM collections WHERE name = 'runbooks')"
    # Columns no route reads: a sync claim, a publish's metadata, an embedding.
    for pool, sql in (
        ("repository", "UPDATE repositories SET sync_due_at = now(), commit_sha = 'x'"),
        ("collection", "UPDATE collections SET sync_due_at = now(), description = 'x'"),
        ("collection", "UPDATE md_collection_chunks SET content_hash = 'y'"),
    ):
        before = await version(pool)
        await stores.writer.execute(sql)
        assert await version(pool) == before, sql
    changes = {
        "repository": (
            f"UPDATE repositories SET public = NOT public WHERE id = {infra}",
            f"UPDATE repositories SET slug = 'gitlab.com/ops/infra2' WHERE id = {infra}",
            "INSERT INTO grants (principal_id, repository_id) "
            "SELECT 'bob', id FROM repositories WHERE slug = 'gitlab.com/ops/infra2'",
            "UPDATE grants SET principal_id = 'carol' WHERE principal_id = 'bob'",
            "DELETE FROM repository_terms WHERE term = 'terraform'",
            "DELETE FROM repositories WHERE slug = 'gitlab.com/ops/infra2'",
        ),
        "collection": (
            f"UPDATE collections SET public = NOT public WHERE id = {runbooks}",
            f"INSERT INTO grants (principal_id, collection_id) SELECT 'bob', {runbooks}",
            "DELETE FROM collection_terms WHERE term = 'operational'",
            "UPDATE md_collection_chunks SET tsv = to_tsvector('english', 'changed') "
            f"WHERE collection_id = {runbooks}",
            f"UPDATE collections SET name = 'runbooks2' WHERE id = {runbooks}",
            "DELETE FROM collections WHERE name = 'runbooks2'",
        ),
    }
    for pool, statements in changes.items():
        for sql in statements:
            before = await version(pool)
            await stores.writer.execute(sql)
            assert await version(pool) > before, sql


async def test_a_version_that_went_back_is_a_change(stores: Stores) -> None:
    # A database restored from a backup has a lower sum than the one the cache was read at.
    assert SECRET in (await stores.repositories(ALICE, "ledger")).matches
    async with stores.writer.transaction():
        await stores.writer.execute("DELETE FROM grants WHERE principal_id = 'alice'")
        await stores.writer.execute("DELETE FROM router_versions")
    assert SECRET not in (await stores.repositories(ALICE, "ledger")).matches

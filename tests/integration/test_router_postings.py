"""The router's postings (migrations/0001) stay equal to a rebuild from retrieval's tables.

Whatever retrieval does (insert, replace a source's terms, delete a source, cascade, re-index a
document's chunks, set embeddings), the trigger-maintained tables must equal what the backfill
computes from scratch, and the token path must find exactly what a direct substring match on
the corpus entries finds.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from router.app import MIGRATIONS
from svckit.migrations import migrate

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO_ROOT = Path(__file__).resolve().parents[2]

# From scratch, as the migration's backfill computes them.
EXPECTED = {
    "router_repository_postings": """
        SELECT DISTINCT t.token, rt.repository_id AS owner, rt.source
        FROM repository_terms rt CROSS JOIN LATERAL router_entry_tokens(rt.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token""",
    "router_collection_postings": """
        SELECT DISTINCT t.token, ct.collection_id AS owner, ct.source
        FROM collection_terms ct CROSS JOIN LATERAL router_entry_tokens(ct.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token""",
}
ACTUAL = {
    "router_repository_postings": """
        SELECT t.token, p.repository_id AS owner, p.source
        FROM router_repository_postings p JOIN router_tokens t ON t.id = p.token_id""",
    "router_collection_postings": """
        SELECT t.token, p.collection_id AS owner, p.source
        FROM router_collection_postings p JOIN router_tokens t ON t.id = p.token_id""",
}
LEXEMES_EXPECTED = """
    SELECT l.lexeme, c.collection_id, count(*)::int AS chunks
    FROM md_collection_chunks c CROSS JOIN LATERAL unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
    GROUP BY 1, 2"""
LEXEMES_ACTUAL = "SELECT lexeme, collection_id, chunks FROM router_collection_lexemes"


async def _set(conn: asyncpg.Connection, sql: str) -> set[tuple[object, ...]]:
    return {tuple(row) for row in await conn.fetch(sql)}


async def assert_consistent(conn: asyncpg.Connection) -> None:
    for table, expected in EXPECTED.items():
        assert await _set(conn, ACTUAL[table]) == await _set(conn, expected), table
    assert await _set(conn, LEXEMES_ACTUAL) == await _set(conn, LEXEMES_EXPECTED)
    # The token path finds what a direct substring match finds, for alphanumeric terms.
    for term in ("retry", "bill", "config", "py", "queue", "ing"):
        direct = await _set(
            conn,
            "SELECT DISTINCT repository_id, source FROM repository_terms "
            f"WHERE term LIKE '%{term}%'",
        )
        via_tokens = await _set(
            conn,
            "SELECT DISTINCT p.repository_id, p.source FROM router_tokens t "
            "JOIN router_repository_postings p ON p.token_id = t.id "
            f"WHERE t.token LIKE '%{term}%'",
        )
        assert via_tokens == direct, term


async def _repo(conn: asyncpg.Connection, slug: str) -> int:
    rid: int = await conn.fetchval(
        "INSERT INTO repositories (slug, source, source_kind) VALUES ($1, $1, 'dir') RETURNING id",
        slug,
    )
    return rid


async def _replace_terms(conn: asyncpg.Connection, rid: int, terms: list[tuple[str, str]]) -> None:
    # What retrieval's replace_terms does, in one transaction.
    async with conn.transaction():
        await conn.execute("DELETE FROM repository_terms WHERE repository_id = $1", rid)
        await conn.execute(
            "INSERT INTO repository_terms (repository_id, source, term) "
            "SELECT $1, s, t FROM unnest($2::text[], $3::text[]) AS u(s, t)",
            rid,
            [s for s, _ in terms],
            [t for _, t in terms],
        )


async def _chunk(conn: asyncpg.Connection, cid: int, path: str, body: str) -> int:
    chunk_id: int = await conn.fetchval(
        "INSERT INTO md_collection_chunks (collection_id, path, start_line, end_line, body, "
        "content_hash, tsv) VALUES ($1, $2, 1, 1, $3, 'h', to_tsvector('english', $3)) "
        "RETURNING id",
        cid,
        path,
        body,
    )
    return chunk_id


async def test_postings_follow_every_change(fresh_db_url: str) -> None:
    await migrate(fresh_db_url, "retrieval", REPO_ROOT / "services/retrieval/migrations")
    conn = await asyncpg.connect(fresh_db_url)
    try:
        # Rows indexed before the router's migration are backfilled by it.
        early = await _repo(conn, "h/o/early")
        await _replace_terms(conn, early, [("qualified_name", "early.config.loader")])
        await migrate(fresh_db_url, "router", MIGRATIONS)
        await assert_consistent(conn)

        a = await _repo(conn, "h/o/a")
        b = await _repo(conn, "h/o/b")
        await _replace_terms(
            conn,
            a,
            [
                ("label", "h/o/a"),
                ("qualified_name", "billing.retry.backoff"),
                ("qualified_name", "billing.retry_queue"),  # retry again, same source
                ("path", "billing/retry/backoff.py"),
                ("readme", "billing"),
            ],
        )
        await _replace_terms(conn, b, [("qualified_name", "queue.config"), ("readme", "retrying")])
        await assert_consistent(conn)
        # Re-index a with fewer entries: retry must stay (still in retry_queue), backoff goes.
        await _replace_terms(conn, a, [("qualified_name", "billing.retry_queue")])
        await assert_consistent(conn)
        # One entry deleted, another updated in place.
        await conn.execute("DELETE FROM repository_terms WHERE term = 'queue.config'")
        await conn.execute(
            "UPDATE repository_terms SET term = 'billing.config' WHERE term = 'retrying'"
        )
        await assert_consistent(conn)
        # Deleting a repository cascades to its terms, and so to its postings.
        await conn.execute("DELETE FROM repositories WHERE id = $1", a)
        await assert_consistent(conn)
        assert not await conn.fetchval(
            "SELECT count(*) FROM router_repository_postings WHERE repository_id = $1", a
        )

        cid = await conn.fetchval("INSERT INTO collections (name) VALUES ('c') RETURNING id")
        other = await conn.fetchval("INSERT INTO collections (name) VALUES ('d') RETURNING id")
        await conn.executemany(
            "INSERT INTO collection_terms (collection_id, source, term) VALUES ($1, $2, $3)",
            [(cid, "label", "c"), (cid, "heading", "retry policy"), (other, "label", "d")],
        )
        first = await _chunk(conn, cid, "a.md", "Retries are scheduled with backoff.")
        await _chunk(conn, cid, "a.md", "Backoff doubles each time.")
        await _chunk(conn, other, "b.md", "Backoff elsewhere.")
        await assert_consistent(conn)
        # Setting an embedding leaves the lexemes alone; changing the text moves them.
        await conn.execute(
            "UPDATE md_collection_chunks SET embedding = array_fill(0.1, ARRAY[384])::vector "
            "WHERE id = $1",
            first,
        )
        await assert_consistent(conn)
        await conn.execute(
            "UPDATE md_collection_chunks SET tsv = to_tsvector('english', 'ledger entries') "
            "WHERE id = $1",
            first,
        )
        await assert_consistent(conn)
        # Re-indexing a document (delete its chunks, insert new ones), then dropping it all.
        async with conn.transaction():
            await conn.execute("DELETE FROM md_collection_chunks WHERE path = 'a.md'")
            await _chunk(conn, cid, "a.md", "Invoices are retried nightly.")
        await assert_consistent(conn)
        await conn.execute("DELETE FROM collections WHERE id = $1", cid)
        await assert_consistent(conn)
        assert not await conn.fetchval(
            "SELECT count(*) FROM router_collection_lexemes WHERE collection_id = $1", cid
        )
        await conn.execute("TRUNCATE repository_terms, collection_terms, md_collection_chunks")
        await assert_consistent(conn)
    finally:
        await conn.close()

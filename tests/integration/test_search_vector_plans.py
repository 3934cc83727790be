"""Every vector stream query is served by its HNSW index, at two scales, with the planner
left to its own costs (sequential scans enabled): code bodies, summaries, repository
documents and collection chunks; unscoped and scoped; admin and a non-admin whose access
filter is in the query; with a time filter. Issue 29: at 20k nodes a join to
`repositories` in the query turned the plan into a sequential scan and a sort of every row,
and the old test (seqscan disabled) could not see it.

The plan checked is the one a search runs: the statement and transaction settings come from
search_sql.vector_statement, as run_vector executes them. Each query's rows are checked
against the filters too (access, published generation, scope, time), and a scope too small
for the index (a tiny repository in a large table) is checked to get an exact scan.

The tables hold random unit vectors; the HNSW indexes are built after the load (as
bench/search.py does), which is what keeps the larger scale to a minute or two.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
import numpy.typing as npt
import pytest
import pytest_asyncio
from pgvector.asyncpg import register_vector

from cograph_api.access_rules import Viewer
from retrieval.layers import Store, Unit
from retrieval.search import search_sql
from retrieval.search.search_settings import DEFAULT_CANDIDATE_CAP
from retrieval.search.search_sql import Scope
from tests.integration.support.databases import retrieval_database

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]

CAP = DEFAULT_CANDIDATE_CAP  # RETRIEVAL_CANDIDATE_CAP
DIM = 384
READER = "reader"  # a non-admin with a grant on one private repository and collection
START = datetime(2024, 1, 1, tzinfo=UTC)
DAYS = 700  # rows changed on day i % DAYS after START
# Indexes dropped for the load and rebuilt after it (names from 0001_indexing.sql).
VECTOR_INDEXES = {
    "code_nodes_embedding": "code_nodes USING hnsw (embedding vector_cosine_ops)",
    "code_nodes_summary_embedding": "code_nodes USING hnsw (summary_embedding vector_cosine_ops)",
    "repo_docs_embedding": "repo_docs USING hnsw (embedding vector_cosine_ops)",
    "md_collection_chunks_embedding": "md_collection_chunks USING hnsw "
    "(embedding vector_cosine_ops)",
}
INDEX_OF: dict[tuple[Store, Unit], str] = {
    ("code", "body"): "code_nodes_embedding",
    ("code", "summary"): "code_nodes_summary_embedding",
    ("repo_docs", "doc"): "repo_docs_embedding",
    ("md_collections", "doc"): "md_collection_chunks_embedding",
}
# Owners: (slug or name, share of the rows, public, granted to READER, published generation)
OWNERS = (
    ("example.com/o/big", 0.5, True, False, 2),
    ("example.com/o/private", 0.3, False, True, 1),
    ("example.com/o/hidden", 0.195, False, False, 0),
    ("example.com/o/tiny", 0.005, True, False, 0),
)
BIG, TINY = OWNERS[0][0], OWNERS[3][0]


@dataclass(frozen=True)
class Corpus:
    pool: asyncpg.Pool
    rows: int
    query: npt.NDArray[np.float32]


def _unit_vectors(rng: np.random.Generator, count: int) -> npt.NDArray[np.float32]:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


async def _load(conn: asyncpg.Connection, rows: int) -> None:
    """`rows` rows in each vector table, spread over OWNERS; one row in 20 belongs to the
    owner's next, unpublished generation."""
    rng = np.random.default_rng(29)
    for name in VECTOR_INDEXES:
        await conn.execute(f"DROP INDEX {name}")
    records = []
    start = 0
    for number, (name, share, public, granted, generation) in enumerate(OWNERS):
        repository = await conn.fetchval(
            "INSERT INTO repositories (slug, source, source_kind, public, published_generation) "
            "VALUES ($1, '/dev/null', 'dir', $2, $3) RETURNING id",
            name,
            public,
            generation,
        )
        collection = await conn.fetchval(
            "INSERT INTO collections (name, public, published_generation) "
            "VALUES ($1, $2, $3) RETURNING id",
            f"collection-{number}",
            public,
            generation,
        )
        if granted:
            await conn.execute(
                "INSERT INTO grants (principal_id, repository_id) VALUES ($1, $2)",
                READER,
                repository,
            )
            await conn.execute(
                "INSERT INTO grants (principal_id, collection_id) VALUES ($1, $2)",
                READER,
                collection,
            )
        count = max(1, round(rows * share)) if number < len(OWNERS) - 1 else rows - start
        body, summary, doc, chunk = (_unit_vectors(rng, count) for _ in range(4))
        for j in range(count):
            i = start + j
            row_generation = generation + 1 if i % 20 == 0 else generation
            records.append(
                (repository, collection, row_generation, i, body[j], summary[j], doc[j], chunk[j])
            )
        start += count
    async with conn.transaction():
        await conn.execute(
            "CREATE TEMP TABLE bulk (repository bigint, collection bigint, generation bigint, "
            "i int, body vector(384), summary vector(384), doc vector(384), "
            "chunk vector(384)) ON COMMIT DROP"
        )
        await conn.copy_records_to_table("bulk", records=records)
        changed = f"$1::timestamptz + (i % {DAYS}) * interval '1 day'"
        await conn.execute(
            "INSERT INTO code_nodes (repository_id, generation, path, language, "
            "qualified_name, name, kind, start_line, end_line, body, content_hash, tsv, "
            "embedding, summary_embedding, created_at, last_changed_at) "
            "SELECT repository, generation, 'm' || i || '.py', 'python', 'm.f' || i, "
            "'f' || i, 'function', 1, 2, 'pass', 'h', to_tsvector('simple', 'f' || i), "
            f"body, summary, {changed} - interval '30 days', {changed} FROM bulk",
            START,
        )
        await conn.execute(
            "INSERT INTO repo_docs (repository_id, generation, path, start_line, end_line, "
            "body, content_hash, tsv, embedding, updated_at) "
            "SELECT repository, generation, 'd' || i || '.md', 1, 2, 'text', 'h', "
            f"to_tsvector('english', 'text'), doc, {changed} FROM bulk",
            START,
        )
        await conn.execute(
            "INSERT INTO md_collection_chunks (collection_id, generation, path, start_line, "
            "end_line, body, content_hash, tsv, embedding, updated_at) "
            "SELECT collection, generation, 'c' || i || '.md', 1, 2, 'text', 'h', "
            f"to_tsvector('english', 'text'), chunk, {changed} FROM bulk",
            START,
        )
        # What publication records (index_store.py): the rows each owner holds.
        await conn.execute(
            "UPDATE repositories r SET "
            "node_count = (SELECT count(*) FROM code_nodes WHERE repository_id = r.id), "
            "doc_chunk_count = (SELECT count(*) FROM repo_docs WHERE repository_id = r.id)"
        )
        await conn.execute(
            "UPDATE collections c SET chunk_count = "
            "(SELECT count(*) FROM md_collection_chunks WHERE collection_id = c.id)"
        )
    await conn.execute("SET maintenance_work_mem = '256MB'")
    for name, definition in VECTOR_INDEXES.items():
        await conn.execute(f"CREATE INDEX {name} ON {definition}")
    await conn.execute("ANALYZE")


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=[2_000, 20_000])
async def corpus(pg_server_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Corpus]:
    rows: int = request.param
    async with retrieval_database(pg_server_url, prefix="v") as (url, pool):
        # Its own connection: building the indexes outlasts the pool's statement_timeout.
        conn = await asyncpg.connect(url)
        try:
            await register_vector(conn)
            await _load(conn, rows)
        finally:
            await conn.close()
        yield Corpus(pool, rows, _unit_vectors(np.random.default_rng(1), 1)[0])


def _scopes(store: Store) -> list[tuple[str, Scope]]:
    reader, admin = Viewer(READER, False), Viewer("root", True)
    scoped: dict[str, str] = (
        {"collection": "collection-0"} if store == "md_collections" else {"repo": BIG}
    )
    return [
        ("unscoped, non-admin", Scope(reader)),
        ("unscoped, admin", Scope(admin)),
        ("scoped, non-admin", Scope(reader, **scoped)),  # type: ignore[arg-type]
        ("as_of", Scope(reader, as_of=START + timedelta(days=2 * DAYS))),
        (
            "since and until",
            Scope(reader, since=START, until=START + timedelta(days=2 * DAYS)),
        ),
    ]


async def _run(
    conn: asyncpg.Connection, store: Store, unit: Unit, scope: Scope, query: npt.NDArray[np.float32]
) -> tuple[str, list[asyncpg.Record], bool]:
    """The plan (EXPLAIN) and the rows of the vector query a search runs, with its own
    settings and nothing else."""
    async with conn.transaction():
        statement = await search_sql.vector_statement(
            conn, store, unit, scope=scope, vector=query, cap=CAP
        )
        assert statement is not None
        await conn.execute(statement.settings)
        plan = "\n".join(
            r[0] for r in await conn.fetch("EXPLAIN " + statement.sql, *statement.args)
        )
        rows = await conn.fetch(statement.sql, *statement.args)
    return plan, rows, statement.indexed


async def _eligible(conn: asyncpg.Connection, store: Store, scope: Scope) -> set[int]:
    """Every row id the scope may return, by the join the old query used (the reference)."""
    params = search_sql._Params()
    source, where = search_sql._source(store, scope, params)
    rows = await conn.fetch(
        f"SELECT t.id FROM {source} WHERE {' AND '.join(where)}", *params.values
    )
    return {int(r["id"]) for r in rows}


@pytest.mark.parametrize(("store", "unit"), list(INDEX_OF))
async def test_every_vector_query_uses_its_index(corpus: Corpus, store: Store, unit: Unit) -> None:
    index = INDEX_OF[(store, unit)]
    async with corpus.pool.acquire() as conn:
        for label, scope in _scopes(store):
            plan, rows, indexed = await _run(conn, store, unit, scope, corpus.query)
            assert indexed, label
            assert f"Index Scan using {index}" in plan, f"{label} at {corpus.rows} rows:\n{plan}"
            assert "Sort" not in plan, f"{label} at {corpus.rows} rows:\n{plan}"
            # The filters hold inside the index scan: a full list, every row one the scope
            # may read (access, published generation, repository, time).
            eligible = await _eligible(conn, store, scope)
            ids = [int(r["id"]) for r in rows]
            assert len(ids) == min(CAP, len(eligible)), label
            assert set(ids) <= eligible, label


async def test_a_scope_too_small_for_the_index_gets_an_exact_scan(corpus: Corpus) -> None:
    """The tiny repository holds 0.5% of the table: an iterative index scan would have to
    visit about CAP / 0.005 = 60,000 tuples, past hnsw.max_scan_tuples (20,000), to find
    CAP of its rows, so the query ranks every row of the scope exactly instead: complete,
    and cheaper (the repository's own index, a few rows)."""
    async with corpus.pool.acquire() as conn:
        scope = Scope(Viewer(READER, False), repo=TINY)
        plan, rows, indexed = await _run(conn, "code", "body", scope, corpus.query)
        eligible = await _eligible(conn, "code", scope)
        exact = await conn.fetch(
            "SELECT id FROM code_nodes WHERE id = ANY($1::bigint[]) "
            "ORDER BY embedding <=> $2 LIMIT $3",
            list(eligible),
            corpus.query,
            CAP,
        )
    assert not indexed
    assert "code_nodes_embedding" not in plan, plan
    assert {int(r["id"]) for r in rows} == {int(r["id"]) for r in exact}

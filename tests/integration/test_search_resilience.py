"""Failure and concurrency over real gRPC: a dead embedder empties only the vector stream,
a failing stream contributes nothing (and says so), a cancelled request leaves no query
running in PostgreSQL, concurrent streams return exactly what sequential ones do, and the
stream queries use their indexes (HNSW with iterative scan, trigram GIN)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import grpc
import numpy as np
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.access_rules import Viewer
from retrieval.search import search_sql
from retrieval.search.search_sql import Scope
from retrieval.search.snapshot import on_connection
from tests.integration.support.retrieval import ADMIN, ALICE, SearchEnv, ranked, serving
from tests.integration.support.search_corpus import DEMO

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("ParseConfig", {}),
    ("func (s *Server) Handle", {"repo": DEMO}),
    ("how does billing retry a failed charge", {"top_k": 50}),
    ("read text from a file", {"layers": [pb.LAYER_CODE, pb.LAYER_AST, pb.LAYER_AST_SUMMARY]}),
]


async def test_dead_embedder_empties_only_the_vector_stream(search_env: SearchEnv) -> None:
    async with serving(
        search_env.db_url, search_env.data_dir, "127.0.0.1:1", EMBEDDER_TIMEOUT_S="0.5"
    ) as (_, stub):
        reply = await search_env.search("ParseConfig", stub=stub, repo=DEMO)
    assert reply.streams.vector == pb.STREAM_STATUS_UNAVAILABLE
    assert reply.streams.lexical == pb.STREAM_STATUS_OK
    assert reply.streams.symbol == pb.STREAM_STATUS_OK
    top = reply.results[0]
    assert top.qualified_name.endswith("ParseConfig")
    assert all(p.stream != pb.STREAM_VECTOR for r in reply.results for p in r.provenance)
    assert not top.HasField("vector_score") and top.HasField("symbol_score")


async def test_failing_stream_logs_and_contributes_nothing(
    search_env: SearchEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise asyncpg.PostgresError("injected symbol failure")

    monkeypatch.setattr(search_sql, "run_symbol", broken)
    with caplog.at_level(logging.WARNING, logger="retrieval.search.engine"):
        reply = await search_env.search("ParseConfig", repo=DEMO)
    assert reply.streams.symbol == pb.STREAM_STATUS_UNAVAILABLE
    assert reply.streams.vector == pb.STREAM_STATUS_OK
    assert reply.streams.lexical == pb.STREAM_STATUS_OK
    assert reply.results[0].qualified_name.endswith("ParseConfig")
    assert all(p.stream != pb.STREAM_SYMBOL for r in reply.results for p in r.provenance)
    assert any("search stream failed" in rec.getMessage() for rec in caplog.records)


async def test_a_stream_past_the_statement_timeout_is_left_out(
    search_env: SearchEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement the server cancels at statement_timeout empties its stream only; when
    every stream query is cancelled the search fails as unavailable (not an empty answer)."""
    monkeypatch.setenv("COGRAPH_DB_STATEMENT_TIMEOUT_S", "1")
    async with serving(search_env.db_url, search_env.data_dir, search_env.embedder_addr) as (
        _,
        stub,
    ):
        locker = await asyncpg.connect(search_env.db_url)
        try:
            # The repository documents' queries wait for this lock until the server cancels
            # them; the code queries do not.
            await locker.execute("BEGIN; LOCK TABLE repo_docs IN ACCESS EXCLUSIVE MODE")
            reply = await search_env.search("ParseConfig", stub=stub)
            assert reply.results[0].qualified_name.endswith("ParseConfig")
            assert reply.streams.symbol == pb.STREAM_STATUS_OK
            for name in ("vector", "lexical"):  # each has a code and a documents query
                assert getattr(reply.streams, name) == pb.STREAM_STATUS_UNAVAILABLE
                assert reply.streams.reasons[name] == "stream_timed_out"
            assert reply.results and all(r.layer != pb.LAYER_REPO_DOC for r in reply.results)
            # Every table the streams read locked: nothing answers, and the search says so.
            await locker.execute("LOCK TABLE code_nodes IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(grpc.aio.AioRpcError) as failure:
                await search_env.search("ParseConfig", stub=stub)
            assert failure.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await locker.execute("ROLLBACK")
            await locker.close()
        # Healthy again once the lock is gone.
        reply = await search_env.search("ParseConfig", stub=stub)
        assert reply.streams.vector == pb.STREAM_STATUS_OK
        assert reply.streams.lexical == pb.STREAM_STATUS_OK


async def _running(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND state = 'active' AND query ILIKE '%code_nodes%'"
    )
    return [row["query"] for row in rows]


@pytest.mark.parametrize("concurrent", ["true", "false"])
async def test_cancelled_request_leaves_no_query_running(
    search_env: SearchEnv, concurrent: str
) -> None:
    async with serving(
        search_env.db_url,
        search_env.data_dir,
        search_env.embedder_addr,
        RETRIEVAL_STREAMS_CONCURRENT=concurrent,
    ) as (_, stub):
        locker = await asyncpg.connect(search_env.db_url)
        watcher = await asyncpg.connect(search_env.db_url)
        try:
            # Hold a lock every stream query must wait for, so they are running (blocked
            # inside PostgreSQL) when the caller gives up.
            await locker.execute("BEGIN; LOCK TABLE code_nodes IN ACCESS EXCLUSIVE MODE")
            call = stub.Search(pb.SearchRequest(query="ParseConfig"), metadata=ADMIN, timeout=30)
            for _ in range(100):
                if await _running(watcher):
                    break
                await asyncio.sleep(0.05)
            assert await _running(watcher), "the search never reached PostgreSQL"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(100):
                if not await _running(watcher):
                    break
                await asyncio.sleep(0.05)
            assert not await _running(watcher)
        finally:
            await locker.execute("ROLLBACK")
            await locker.close()
            await watcher.close()
        # The server is healthy afterwards.
        reply = await stub.Search(pb.SearchRequest(query="ParseConfig"), metadata=ADMIN, timeout=30)
        assert reply.results


async def test_concurrent_equals_sequential(search_env: SearchEnv) -> None:
    async with serving(
        search_env.db_url,
        search_env.data_dir,
        search_env.embedder_addr,
        RETRIEVAL_STREAMS_CONCURRENT="false",
    ) as (_, sequential):
        for query, fields in QUERIES:
            for who in (ADMIN, ALICE):
                one = await search_env.search(query, metadata=who, **fields)
                two = await search_env.search(query, metadata=who, stub=sequential, **fields)
                assert ranked(one) == ranked(two), query
                assert [r.score for r in one.results] == [r.score for r in two.results]
                assert [list(r.provenance) for r in one.results] == [
                    list(r.provenance) for r in two.results
                ]
                assert one.streams == two.streams


async def _plan(conn: asyncpg.Connection, sql: str, args: list[Any], setup: str) -> str:
    async with conn.transaction():
        await conn.execute(setup)
        rows = await conn.fetch("EXPLAIN " + sql, *args)
    return "\n".join(row[0] for row in rows)


async def test_stream_queries_use_their_indexes(search_env: SearchEnv) -> None:
    """With the ACL filter in place, the lexical and symbol query shapes can be served by
    their indexes.

    Sequential scans are disabled for the EXPLAIN: at a few thousand rows a scan is
    genuinely cheaper and the planner is right to pick it. What this checks is that nothing
    in the SQL (an extra ORDER BY key, a function around the column) rules the index out.
    The vector queries' plans are checked as a search runs them, seqscan enabled, at two
    scales, in test_search_vector_plans.py."""
    rng = np.random.default_rng(7)
    async with search_env.pool.acquire() as conn:
        repository = await conn.fetchval(
            "INSERT INTO repositories (slug, source, source_kind) "
            "VALUES ('example.com/bulk/plan', '/dev/null', 'dir') RETURNING id"
        )
        try:
            vectors = rng.standard_normal((2000, 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            # tsvector has no binary COPY format: stage it as text, then cast.
            async with conn.transaction():
                # The load maintains the HNSW indexes row by row (seconds on a busy machine):
                # set-up, not what the test measures, so the pool's statement timeout is lifted.
                await conn.execute("SET LOCAL statement_timeout = '300s'")
                await conn.execute(
                    "CREATE TEMP TABLE bulk (i int, tsv text, embedding vector(384)) ON COMMIT DROP"
                )
                await conn.copy_records_to_table(
                    "bulk",
                    records=[(i, f"func{i}", vectors[i]) for i in range(2000)],
                )
                await conn.execute(
                    "INSERT INTO code_nodes (repository_id, path, language, qualified_name, "
                    "name, kind, start_line, end_line, body, content_hash, tsv, embedding) "
                    "SELECT $1, 'm' || i || '.py', 'python', 'bulk.m' || i || '.func_' || i, "
                    "'func_' || i, 'function', 1, 2, 'def func_' || i || '(): pass', 'h', "
                    "tsv::tsvector, embedding FROM bulk",
                    repository,
                )
            await conn.execute("ANALYZE code_nodes")
            scope = Scope(Viewer("alice", False))
            symbol_sql, args = search_sql.symbol_sql(scope, "func_123", 300)
            plan = await _plan(
                conn,
                symbol_sql,
                args,
                "SET LOCAL enable_seqscan = off; SET LOCAL pg_trgm.similarity_threshold = 0.3",
            )
            # A short name's trigram-count band (search_sql.SYMBOL_BOUNDED_TRIGRAMS) may be
            # read alone when it is narrower than the name's trigram matches.
            assert "code_nodes_qname_trgm" in plan or "code_nodes_qname_trigrams" in plan, plan
            assert "Seq Scan on code_nodes" not in plan, plan
            # BM25: candidates through the GIN index, each lexeme's document frequency by
            # its key, never a count over the table per query.
            lexical_sql, args = search_sql.lexical_sql("code", "body", scope, "func1 | func2", 300)
            plan = await _plan(conn, lexical_sql, args, "SET LOCAL enable_seqscan = off")
            assert "code_nodes_tsv" in plan and "lexical_df_pkey" in plan, plan
            # And the vector stream returns a full candidate list under the filter.
            hits = await search_sql.run_vector(
                on_connection(conn),
                "code",
                "body",
                scope=Scope(Viewer("root", True)),
                vector=vectors[0],
                cap=300,
            )
            assert len(hits) == 300 and hits[0].score == pytest.approx(1.0, abs=1e-5)
        finally:
            await conn.execute("DELETE FROM repositories WHERE id = $1", repository)

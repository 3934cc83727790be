"""Atomic publication: a run that stops midway leaves the previous version searchable (and
a first index nothing), the next run discards what the stopped one wrote and publishes the
new version whole. Real PostgreSQL, the real embedder and the search SQL itself."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient, Vectors
from retrieval.indexing.indexer import CollectionRequest, Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.search.search_sql import Scope, symbol_sql
from retrieval.settings import IndexSettings
from svckit.config import Env
from tests.integration.support.embedders import CountingEmbedder
from tests.integration.support.git_repos import MAR, UTIL, commit_all, make_repo, write

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "local/test/publication"
ADMIN = Viewer("root", True)


async def _index(
    pool: asyncpg.Pool, embedder: CountingEmbedder, root: Path, tmp_path: Path, slug: str = SLUG
) -> Job:
    # One text per Embed call and one file per write: a failure lands between writes.
    settings = IndexSettings.from_env(
        Env(
            {
                "RETRIEVAL_MAX_FILE_BYTES": "8000",
                "RETRIEVAL_EMBED_BATCH": "1",
                "RETRIEVAL_EMBED_CONCURRENCY": "2",
                "RETRIEVAL_WRITE_GROUP": "1",
                "RETRIEVAL_EMBEDDER_WAIT_S": "0",
            }
        )
    )
    indexer = Indexer(pool, embedder, settings, ExtractiveSummarizer(), tmp_path / "data")
    job = Job("job", "repository", slug)
    await indexer.index_repository(RepositoryRequest(str(root), slug), job)
    return job


@dataclass
class FailingOn(CountingEmbedder):
    """Fails a batch holding `marker` after a pause, while other batches go through."""

    marker: str = "write_text"

    async def embed(self, texts: list[str], timeout: float | None = None) -> Vectors:
        if any(self.marker in text for text in texts):
            await asyncio.sleep(1.5)
            raise RuntimeError("injected embedder failure")
        return await super().embed(texts, timeout)


async def _searchable(pool: asyncpg.Pool, slug: str = SLUG) -> set[tuple[str, str]]:
    """(path, qualified name) of the code nodes a search reads: the published generation."""
    rows = await pool.fetch(
        """
        SELECT n.path, n.qualified_name FROM code_nodes n
        JOIN repositories r ON r.id = n.repository_id
        WHERE r.slug = $1 AND n.generation <= r.published_generation
        """,
        slug,
    )
    return {(r["path"], r["qualified_name"]) for r in rows}


async def _stored_texts(pool: asyncpg.Pool, slug: str = SLUG) -> dict[str, str]:
    """path -> the text read and grep answer from."""
    rows = await pool.fetch(
        """
        SELECT c.path, c.content FROM file_contents c
        JOIN repositories r ON r.id = c.repository_id WHERE r.slug = $1
        """,
        slug,
    )
    return {r["path"]: r["content"] for r in rows}


async def _symbol_hits(pool: asyncpg.Pool, name: str, slug: str = SLUG) -> list[str]:
    sql, params = symbol_sql(Scope(ADMIN, repo=slug), name, 50)
    async with pool.acquire() as conn:
        rows = await conn.fetch(sql, *params)
        ids = [r["id"] for r in rows if r["exact"]]
        names = await conn.fetch(
            "SELECT qualified_name FROM code_nodes WHERE id = ANY($1::bigint[])", ids
        )
    return sorted(r["qualified_name"] for r in names)


async def test_a_stopped_run_leaves_the_previous_version_searchable(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    pool = retrieval_pool
    root = make_repo(tmp_path / "demo")
    await _index(pool, CountingEmbedder(embedder_client), root, tmp_path)
    before = await _searchable(pool)
    assert ("pkg/util.py", "pkg.util.read_text") in before
    assert any(path == "config/settings.yaml" for path, _ in before)
    assert await _symbol_hits(pool, "read_text") == ["pkg.util.read_text"]

    write(root, "pkg/util.py", UTIL + "\n\ndef write_text(path: str) -> None:\n    pass\n")
    write(root, "pkg/extra.py", "def extra():\n    return 1\n")
    for n in range(4):
        write(root, f"pkg/more{n}.py", f"def more{n}():\n    return {n}\n")
    (root / "config/settings.yaml").unlink()
    commit_all(root, "three changes", MAR)
    # The embedder fails on util.py: the other files of the new version are written.
    with pytest.raises(ExceptionGroup):
        await _index(pool, FailingOn(embedder_client), root, tmp_path)
    written = await pool.fetchval("SELECT count(*) FROM code_nodes WHERE generation = 2")
    assert written > 0, "the stopped run wrote part of the new version"
    assert await _searchable(pool) == before
    assert await _symbol_hits(pool, "write_text") == []
    assert await _symbol_hits(pool, "read_text") == ["pkg.util.read_text"]
    # Read and grep answer from the stored texts: still the published version's.
    texts = await _stored_texts(pool)
    assert "write_text" not in texts["pkg/util.py"] and "pkg/extra.py" not in texts
    assert "config/settings.yaml" in texts

    # The next run discards the stopped run's rows and publishes the new version whole.
    await _index(pool, CountingEmbedder(embedder_client), root, tmp_path)
    after = await _searchable(pool)
    assert ("pkg/util.py", "pkg.util.write_text") in after
    assert ("pkg/extra.py", "pkg.extra.extra") in after
    assert not any(path == "config/settings.yaml" for path, _ in after)
    assert await _symbol_hits(pool, "write_text") == ["pkg.util.write_text"]
    assert await _symbol_hits(pool, "read_text") == ["pkg.util.read_text"]
    texts = await _stored_texts(pool)
    assert "def write_text" in texts["pkg/util.py"] and "def extra" in texts["pkg/extra.py"]
    assert "config/settings.yaml" not in texts
    assert await pool.fetchval("SELECT count(*) FROM file_contents_staged") == 0
    # Nothing is left of the replaced rows or of the stopped run.
    total = await pool.fetchval("SELECT count(*) FROM code_nodes")
    assert total == len(after)
    repo = await pool.fetchrow(
        "SELECT published_generation, node_count FROM repositories WHERE slug = $1", SLUG
    )
    assert repo is not None and repo["published_generation"] == 2
    assert repo["node_count"] == total


async def test_a_stopped_first_index_leaves_nothing_searchable(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    pool = retrieval_pool
    root = make_repo(tmp_path / "first")
    with pytest.raises(ExceptionGroup):
        failing = FailingOn(embedder_client, marker="read_text")
        await _index(pool, failing, root, tmp_path, "local/t/first")
    assert await pool.fetchval("SELECT count(*) FROM code_nodes") > 0
    assert await _searchable(pool, "local/t/first") == set()
    assert await _symbol_hits(pool, "read_text", "local/t/first") == []
    assert await _stored_texts(pool, "local/t/first") == {}  # nothing to read or grep yet
    await _index(pool, CountingEmbedder(embedder_client), root, tmp_path, "local/t/first")
    assert await _symbol_hits(pool, "read_text", "local/t/first") == ["pkg.util.read_text"]


# ---- collections publish the same way ----


async def _index_collection(
    pool: asyncpg.Pool, embedder: CountingEmbedder, directory: Path, tmp_path: Path
) -> None:
    settings = IndexSettings.from_env(
        Env(
            {
                "RETRIEVAL_EMBED_BATCH": "1",
                "RETRIEVAL_EMBED_CONCURRENCY": "2",
                "RETRIEVAL_WRITE_GROUP": "1",
                "RETRIEVAL_EMBEDDER_WAIT_S": "0",
            }
        )
    )
    indexer = Indexer(pool, embedder, settings, ExtractiveSummarizer(), tmp_path / "data")
    job = Job("job", "collection", "handbook")
    await indexer.index_collection(CollectionRequest("handbook", directory=str(directory)), job)


async def _published_chunks(pool: asyncpg.Pool) -> dict[str, str]:
    """path -> the text of its chunks that a search reads (the published generation)."""
    rows = await pool.fetch(
        """
        SELECT t.path, string_agg(t.body, ' ' ORDER BY t.start_line) AS body
        FROM md_collection_chunks t JOIN collections c ON c.id = t.collection_id
        WHERE c.name = 'handbook' AND t.generation <= c.published_generation
        GROUP BY t.path
        """
    )
    return {r["path"]: r["body"] for r in rows}


async def _collection_texts(pool: asyncpg.Pool) -> dict[str, str]:
    rows = await pool.fetch(
        """
        SELECT d.path, d.content FROM collection_document_contents d
        JOIN collections c ON c.id = d.collection_id WHERE c.name = 'handbook'
        """
    )
    return {r["path"]: r["content"] for r in rows}


async def test_a_stopped_collection_run_leaves_the_previous_version(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    pool = retrieval_pool
    docs = tmp_path / "handbook"
    write(docs, "billing.md", "# Billing\n\nCharges are retried three times.\n")
    write(docs, "refunds.md", "# Refunds\n\nRefunds take five days.\n")
    write(docs, "legacy.md", "# Legacy\n\nThe old invoice format.\n")
    await _index_collection(pool, CountingEmbedder(embedder_client), docs, tmp_path)
    before = await _published_chunks(pool)
    assert set(before) == {"billing.md", "refunds.md", "legacy.md"}

    write(docs, "billing.md", "# Billing\n\nCharges are retried by the zeppelin scheduler.\n")
    write(docs, "payouts.md", "# Payouts\n\nPayouts go out on Fridays.\n")
    (docs / "legacy.md").unlink()
    # The embedder fails on the rewritten document: the new one is written, unpublished.
    with pytest.raises(ExceptionGroup):
        await _index_collection(pool, FailingOn(embedder_client, marker="zeppelin"), docs, tmp_path)
    written = await pool.fetchval(
        "SELECT count(*) FROM md_collection_chunks WHERE generation = 2 AND path = 'payouts.md'"
    )
    assert written > 0, "the stopped run wrote part of the new version"
    assert await _published_chunks(pool) == before
    texts = await _collection_texts(pool)
    assert "zeppelin" not in texts["billing.md"] and "legacy.md" in texts
    assert "payouts.md" not in texts

    # The next run discards the stopped run's rows and publishes the new version whole.
    await _index_collection(pool, CountingEmbedder(embedder_client), docs, tmp_path)
    after = await _published_chunks(pool)
    assert set(after) == {"billing.md", "refunds.md", "payouts.md"}
    assert "zeppelin" in after["billing.md"] and after["refunds.md"] == before["refunds.md"]
    texts = await _collection_texts(pool)
    assert set(texts) == set(after) and "zeppelin" in texts["billing.md"]
    # Nothing is left of the replaced chunks or of the stopped run.
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM md_collection_chunks t JOIN collections c "
            "ON c.id = t.collection_id WHERE t.generation > c.published_generation"
        )
        == 0
    )
    assert await pool.fetchval("SELECT count(DISTINCT path) FROM md_collection_chunks") == 3
    assert await pool.fetchval("SELECT count(*) FROM collection_document_contents_staged") == 0
    counts = await pool.fetchrow(
        "SELECT published_generation, document_count FROM collections WHERE name = 'handbook'"
    )
    assert counts is not None and counts["published_generation"] == 2  # the stopped 2 redone
    assert counts["document_count"] == 3

"""Indexing a small multi-language git repository with a known history, end to end against
the real embedder and PostgreSQL (no gRPC: the Indexer directly)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from cograph_api.embedder_client import EmbedderClient
from retrieval.indexing.indexer import Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.settings import IndexSettings
from svckit.config import Env
from tests.integration.support.embedders import CountingEmbedder
from tests.integration.support.git_repos import (
    JAN_TS,
    MAR,
    MAR_TS,
    UTIL,
    commit_all,
    make_repo,
    write,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "local/test/demo"


def _settings() -> IndexSettings:
    return IndexSettings.from_env(Env({"RETRIEVAL_MAX_FILE_BYTES": "8000"}))


def _ts(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


async def _index(pool: asyncpg.Pool, embedder: CountingEmbedder, root: Path, tmp_path: Path) -> Job:
    indexer = Indexer(pool, embedder, _settings(), ExtractiveSummarizer(), tmp_path / "data")
    job = Job("job", "repository", SLUG)
    await indexer.index_repository(RepositoryRequest(str(root), SLUG), job)
    return job


async def _node(pool: asyncpg.Pool, qname: str) -> asyncpg.Record:
    row = await pool.fetchrow("SELECT * FROM code_nodes WHERE qualified_name = $1", qname)
    assert row is not None, qname
    return row


async def _edges(pool: asyncpg.Pool, src: str) -> set[tuple[str, str, str | None]]:
    rows = await pool.fetch(
        """
        SELECT e.kind, e.dst_name, d.qualified_name AS dst
        FROM code_edges e JOIN code_nodes s ON s.id = e.src_node_id
        LEFT JOIN code_nodes d ON d.id = e.dst_node_id
        WHERE s.qualified_name = $1
        """,
        src,
    )
    return {(r["kind"], r["dst_name"], r["dst"]) for r in rows}


async def test_index_nodes_edges_blame_docs_and_skips(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "demo")
    embedder = CountingEmbedder(embedder_client)
    job = await _index(retrieval_pool, embedder, root, tmp_path)
    pool = retrieval_pool

    # qualified names, kinds, line ranges, signatures, docstrings
    config = await _node(pool, "pkg.config.ParseConfig")
    assert (config["kind"], config["start_line"], config["end_line"]) == ("class", 5, 15)
    assert config["docstring"] == "Parses configuration files."
    load = await _node(pool, "pkg.config.ParseConfig.load")
    assert (load["start_line"], load["end_line"]) == (8, 9)
    assert load["signature"] == "def load(self, path: str) -> dict:"
    assert load["parent_id"] == config["id"]
    assert load["language"] == "python" and load["path"] == "pkg/config.py"
    handle = await _node(pool, "server.Server.Handle")
    assert handle["kind"] == "method" and handle["language"] == "go"
    assert handle["signature"] == "func (s *Server) Handle(req string) string"
    greet = await _node(pool, "web.app.Hello.greet")
    assert (greet["start_line"], greet["end_line"]) == (6, 8)

    # typed, resolved edges
    assert await _edges(pool, "pkg.config.ParseConfig.load") == {
        ("calls", "read_text", "pkg.util.read_text"),
        ("calls", "self.parse", "pkg.config.ParseConfig.parse"),
    }
    assert ("implements", "Greeter", "web.app.Greeter") in await _edges(pool, "web.app.Hello")
    assert ("calls", "s.format", "server.Server.format") in await _edges(
        pool, "server.Server.Handle"
    )
    config_edges = await _edges(pool, "pkg.config.ParseConfig")
    assert ("contains", "pkg.config.ParseConfig.load", "pkg.config.ParseConfig.load") in (
        config_edges
    )
    module_edges = await _edges(pool, "pkg.config")
    assert ("imports", "pkg.util.read_text", "pkg.util.read_text") in module_edges

    # blame: created = oldest commit on the node's lines, last changed = newest
    assert (load["created_at"], load["last_changed_at"]) == (_ts(JAN_TS), _ts(JAN_TS))
    assert (config["created_at"], config["last_changed_at"]) == (_ts(JAN_TS), _ts(MAR_TS))
    parse = await _node(pool, "pkg.config.ParseConfig.parse")
    assert (parse["created_at"], parse["last_changed_at"]) == (_ts(JAN_TS), _ts(MAR_TS))
    validate = await _node(pool, "pkg.config.ParseConfig.validate")
    assert (validate["created_at"], validate["last_changed_at"]) == (_ts(MAR_TS), _ts(MAR_TS))

    # embeddings, summaries and the identifier-split full-text column
    assert load["embedding"] is not None and len(load["embedding"].to_list()) == 384
    assert load["summary"].startswith("python method pkg.config.ParseConfig.load.")
    assert "read_text" in load["summary"]
    assert load["summary_embedding"] is not None
    assert await pool.fetchval(
        "SELECT count(*) FROM code_nodes WHERE tsv @@ to_tsquery('simple', 'parse & config')"
        " AND qualified_name = 'pkg.config.ParseConfig'"
    )
    module = await _node(pool, "pkg.config")
    assert module["kind"] == "module" and module["summary"]

    # plain text becomes chunks in the code store; markdown goes to repo_docs by heading
    chunk = await pool.fetchrow("SELECT * FROM code_nodes WHERE path = 'config/settings.yaml'")
    assert chunk["kind"] == "chunk" and chunk["language"] == "yaml"
    docs = await pool.fetch("SELECT * FROM repo_docs ORDER BY start_line")
    assert [list(d["heading_path"]) for d in docs] == [["Demo"], ["Demo", "Setup"]]
    assert docs[0]["updated_at"] == _ts(JAN_TS) and docs[0]["embedding"] is not None
    assert await pool.fetchval(
        "SELECT count(*) FROM repo_docs WHERE tsv @@ plainto_tsquery('english', 'retrying')"
    )

    # skip rules, each counted; ignored files (debug.log, build/) were never committed, and
    # only the commit is indexed, so they are simply absent
    skipped = job.progress.skipped
    for reason in ("lockfile", "vendored", "binary", "minified", "too_large"):
        assert skipped[reason] >= 1, (reason, skipped)
    paths = {r["path"] for r in await pool.fetch("SELECT path FROM files")}
    assert paths == {
        ".gitignore",
        "README.md",
        "config/settings.yaml",
        "pkg/config.py",
        "pkg/util.py",
        "server/server.go",
        "web/app.ts",
    }

    # repository row and router corpus
    repo = await pool.fetchrow("SELECT * FROM repositories WHERE slug = $1", SLUG)
    assert repo["branch"] == "main" and len(repo["commit_sha"]) == 40
    assert repo["indexed_at"] is not None and not repo["needs_linking"]
    assert repo["file_count"] == 7 and repo["node_count"] > 10
    assert repo["readme_excerpt"].startswith("# Demo")
    terms = {
        (r["source"], r["term"])
        for r in await pool.fetch("SELECT source, term FROM repository_terms")
    }
    assert ("label", SLUG) in terms and ("label", "demo") in terms
    assert ("branch", "main") in terms and ("readme", "billing") in terms
    assert ("path", "pkg/config.py") in terms
    assert ("qualified_name", "pkg.config.parseconfig") in terms
    assert ("qualified_name", "pkg.config.parseconfig.load") not in terms  # not module level

    # progress counters
    p = job.progress
    assert p.files_total == p.files_done == 7 and p.files_unchanged == 0
    assert p.embeddings_done == p.embeddings_total == len(embedder.texts)
    assert p.nodes_by_language["python"] >= 6 and p.files_by_language["go"] == 1


async def test_reindex_is_incremental(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    pool = retrieval_pool
    root = make_repo(tmp_path / "demo")
    embedder = CountingEmbedder(embedder_client)
    await _index(pool, embedder, root, tmp_path)
    assert embedder.calls > 0

    # unchanged: nothing embedded, nothing rewritten
    embedder.reset()
    ids_before = {r["id"] for r in await pool.fetch("SELECT id FROM code_nodes")}
    job = await _index(pool, embedder, root, tmp_path)
    assert embedder.calls == 0 and job.progress.files_total == 0
    assert job.progress.files_unchanged == 7
    assert {r["id"] for r in await pool.fetch("SELECT id FROM code_nodes")} == ids_before

    # one changed file: only its texts are embedded; edges into it are repaired
    write(root, "pkg/util.py", UTIL_V2)
    commit_all(root, "util grows", MAR)
    embedder.reset()
    old_target = (await _node(pool, "pkg.util.read_text"))["id"]
    job = await _index(pool, embedder, root, tmp_path)
    util_nodes = await pool.fetch("SELECT * FROM code_nodes WHERE path = 'pkg/util.py'")
    assert job.progress.files_total == 1
    assert len(embedder.texts) == 2 * len(util_nodes)  # code + summary per node
    assert all("util" in t or "read_" in t or "write_" in t for t in embedder.texts)
    new_target = (await _node(pool, "pkg.util.read_text"))["id"]
    assert new_target != old_target
    assert ("calls", "read_text", "pkg.util.read_text") in await _edges(
        pool, "pkg.config.ParseConfig.load"
    )

    # a deleted file disappears, with its nodes, edges and router terms
    (root / "server/server.go").unlink()
    commit_all(root, "drop go", MAR)
    embedder.reset()
    job = await _index(pool, embedder, root, tmp_path)
    assert embedder.calls == 0 and job.progress.files_removed == 1
    assert not await pool.fetchval("SELECT count(*) FROM code_nodes WHERE language = 'go'")
    assert not await pool.fetchval("SELECT count(*) FROM files WHERE path = 'server/server.go'")
    assert not await pool.fetchval(
        "SELECT count(*) FROM repository_terms WHERE term = 'server/server.go'"
    )


async def test_interrupted_run_keeps_previous_index_and_next_run_finishes(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    pool = retrieval_pool
    root = make_repo(tmp_path / "demo")
    await _index(pool, CountingEmbedder(embedder_client), root, tmp_path)
    before = await pool.fetchval("SELECT count(*) FROM code_nodes")

    write(root, "pkg/util.py", UTIL_V2)
    write(root, "pkg/extra.py", "def extra():\n    return 1\n")
    commit_all(root, "two changes", MAR)
    failing = CountingEmbedder(embedder_client, fail_after=0)
    with pytest.raises(ExceptionGroup):
        await _index(pool, failing, root, tmp_path)
    # the old rows are intact and queryable
    assert await pool.fetchval("SELECT count(*) FROM code_nodes") == before
    assert (await _node(pool, "pkg.util.read_text"))["embedding"] is not None
    assert await pool.fetchval("SELECT needs_linking FROM repositories")

    embedder = CountingEmbedder(embedder_client)
    await _index(pool, embedder, root, tmp_path)
    assert await _node(pool, "pkg.extra.extra")
    assert await _node(pool, "pkg.util.write_text")
    assert not await pool.fetchval("SELECT needs_linking FROM repositories")


UTIL_V2 = (
    UTIL
    + """

def write_text(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)
"""
)

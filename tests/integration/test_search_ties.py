"""Rows that tie in a stream's score come back in the order of where they lie (repository,
path, lines), not of their row ids: ids follow the order an index run happened to write in,
so two indexings of the same text would otherwise answer the same question differently. Code
nodes, repository documents and collection chunks; real PostgreSQL, the real embedder, the
indexer and the search SQL."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient
from retrieval.indexing.indexer import CollectionRequest, Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.search.fusion import StreamHit
from retrieval.search.query_text import code_tsquery, doc_tsquery
from retrieval.search.search_sql import Scope, run_lexical, run_symbol
from retrieval.search.snapshot import on_connection
from retrieval.settings import IndexSettings
from svckit.config import Env
from tests.integration.support.git_repos import MAR, commit_all, git, write

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "local/test/ties"
ADMIN = Viewer("root", True)
# The same function in two files: every lexical and symbol score of the two is equal.
TWIN = "def turn_knob(widget):\n    return widget.frobnicate_knob()\n"
# The same section in two documents: equal lexical scores in both document stores.
TWIN_DOC = "# Knobs\n\nTurn the frobnicating knob of the widget gently.\n"


def _indexer(pool: asyncpg.Pool, embedder: EmbedderClient, tmp: Path) -> Indexer:
    return Indexer(
        pool, embedder, IndexSettings.from_env(Env({})), ExtractiveSummarizer(), tmp / "data"
    )


async def _index(pool: asyncpg.Pool, embedder: EmbedderClient, root: Path, tmp: Path) -> None:
    await _indexer(pool, embedder, tmp).index_repository(
        RepositoryRequest(str(root), SLUG), Job("j", "repository", SLUG)
    )


def _twins(hits: list[StreamHit]) -> list[tuple[str, int]]:
    return [
        (hit.span.path, hit.id)
        for hit in hits
        if hit.span is not None and hit.span.qualified_name.endswith(".turn_knob")
    ]


async def test_ties_follow_the_place_not_the_row_id(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    notes = tmp_path / "notes"
    notes.mkdir()
    # b first, a in a later run: a's rows get the larger ids, so id order is b, a.
    write(root, "pkg/b_twin.py", TWIN)
    write(root, "docs/b_twin.md", TWIN_DOC)
    (notes / "b_twin.md").write_text(TWIN_DOC)
    commit_all(root, "b", MAR)
    await _index(retrieval_pool, embedder_client, root, tmp_path)
    collection = CollectionRequest(name="ties", directory=str(notes))
    indexer = _indexer(retrieval_pool, embedder_client, tmp_path)
    await indexer.index_collection(collection, Job("c", "collection", "ties"))
    write(root, "pkg/a_twin.py", TWIN)
    write(root, "docs/a_twin.md", TWIN_DOC)
    (notes / "a_twin.md").write_text(TWIN_DOC)
    commit_all(root, "a", MAR)
    await _index(retrieval_pool, embedder_client, root, tmp_path)
    await indexer.index_collection(collection, Job("c2", "collection", "ties"))

    scope = Scope(ADMIN, repo=SLUG)
    async with retrieval_pool.acquire() as conn:
        streams = {
            "bm25": await run_lexical(
                on_connection(conn),
                "code",
                "body",
                scope=scope,
                tsquery=code_tsquery("frobnicate knob"),
                cap=20,
            ),
            "symbol": await run_symbol(on_connection(conn), "body", scope, "turn_knob", 20),
        }
    for name, hits in streams.items():
        twins = _twins(hits)
        assert [path for path, _ in twins] == ["pkg/a_twin.py", "pkg/b_twin.py"], name
        assert twins[0][1] > twins[1][1], name  # a tie the ids would have ordered b, a
        tied = {hit.score for hit in hits if hit.id in {twin_id for _, twin_id in twins}}
        assert len(tied) == 1, (name, tied)
    words = doc_tsquery("frobnicating knob")
    async with retrieval_pool.acquire() as conn:
        docs = {
            "repo_docs": await run_lexical(
                on_connection(conn), "repo_docs", "doc", scope=scope, tsquery=words, cap=20
            ),
            "md_collections": await run_lexical(
                on_connection(conn),
                "md_collections",
                "doc",
                scope=Scope(ADMIN, collection="ties"),
                tsquery=words,
                cap=20,
            ),
        }
    expected = {"repo_docs": "docs/", "md_collections": ""}
    for name, hits in docs.items():
        prefix = expected[name]
        assert [hit.place[1] for hit in hits] == [f"{prefix}a_twin.md", f"{prefix}b_twin.md"], name
        assert hits[0].id > hits[1].id and hits[0].score == hits[1].score, name
    # Each hit carries its place, which fusion breaks its own ties on.
    first = _twins(streams["symbol"])[0]
    hit = next(h for h in streams["symbol"] if h.id == first[1])
    assert hit.place[1:3] == ("pkg/a_twin.py", 1)

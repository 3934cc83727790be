"""Rows that tie in a stream's score come back in the order of where they lie (repository,
path, lines), not of their row ids: ids follow the order an index run happened to write in,
so two indexings of the same text would otherwise answer the same question differently.
Real PostgreSQL, the real embedder, the indexer and the search SQL."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient
from retrieval.indexing.indexer import Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.search.fusion import StreamHit
from retrieval.search.query_text import code_tsquery
from retrieval.search.search_sql import Scope, run_lexical, run_symbol
from retrieval.settings import IndexSettings
from svckit.config import Env
from tests.integration.support.git_repos import MAR, commit_all, git, write

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "local/test/ties"
ADMIN = Viewer("root", True)
# The same function in two files: every lexical and symbol score of the two is equal.
TWIN = "def turn_knob(widget):\n    return widget.frobnicate_knob()\n"


async def _index(pool: asyncpg.Pool, embedder: EmbedderClient, root: Path, tmp: Path) -> None:
    indexer = Indexer(
        pool, embedder, IndexSettings.from_env(Env({})), ExtractiveSummarizer(), tmp / "data"
    )
    await indexer.index_repository(RepositoryRequest(str(root), SLUG), Job("j", "repository", SLUG))


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
    # b first, a in a later run: a's row gets the larger id, so id order is b, a.
    write(root, "pkg/b_twin.py", TWIN)
    commit_all(root, "b", MAR)
    await _index(retrieval_pool, embedder_client, root, tmp_path)
    write(root, "pkg/a_twin.py", TWIN)
    commit_all(root, "a", MAR)
    await _index(retrieval_pool, embedder_client, root, tmp_path)

    scope = Scope(ADMIN, repo=SLUG)
    async with retrieval_pool.acquire() as conn:
        streams = {
            "bm25": await run_lexical(
                conn, "code", "body", scope=scope, tsquery=code_tsquery("frobnicate knob"), cap=20
            ),
            "cover_density": await run_lexical(
                conn,
                "code",
                "body",
                scope=scope,
                tsquery=code_tsquery("frobnicate knob"),
                cap=20,
                scoring="cover_density",
            ),
            "symbol": await run_symbol(conn, "body", scope, "turn_knob", 20),
        }
    for name, hits in streams.items():
        twins = _twins(hits)
        assert [path for path, _ in twins] == ["pkg/a_twin.py", "pkg/b_twin.py"], name
        assert twins[0][1] > twins[1][1], name  # a tie the ids would have ordered b, a
        tied = {hit.score for hit in hits if hit.id in {twin_id for _, twin_id in twins}}
        assert len(tied) == 1, (name, tied)
    # Each hit carries its place, which fusion breaks its own ties on.
    first = _twins(streams["symbol"])[0]
    hit = next(h for h in streams["symbol"] if h.id == first[1])
    assert hit.place[1:3] == ("pkg/a_twin.py", 1)

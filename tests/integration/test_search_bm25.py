"""BM25 in the lexical stream: the term statistics written when an index is published
(retrieval/term_statistics.py, migration 0009) and the order they give. Real PostgreSQL,
the real embedder, the indexer and the search SQL itself."""

from __future__ import annotations

import math
from pathlib import Path

import asyncpg
import pytest

from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient
from retrieval.app import MIGRATIONS
from retrieval.indexing.indexer import CollectionRequest, Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.search.fusion import StreamHit
from retrieval.search.query_text import code_tsquery
from retrieval.search.search_sql import Scope, run_lexical
from retrieval.search.snapshot import on_connection
from retrieval.settings import IndexSettings
from retrieval.term_statistics import COLLECTION_FIELDS, REPOSITORY_FIELDS, Field
from svckit.config import Env
from tests.integration.support.git_repos import MAR, commit_all, make_repo, write

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "local/test/bm25"
ADMIN = Viewer("root", True)

# Six functions full of `widget` and `value`, one that alone holds the rare `frobnicate`.
COMMON = "\n\n".join(
    f"def widget_value_{i}(widget, value):\n"
    f"    # the widget value, the widget value again\n"
    f"    return widget.value + value + widget.value_{i}\n"
    for i in range(6)
)
RARE = "def frobnicate(widget):\n    return widget.knob\n"


def _indexer(pool: asyncpg.Pool, embedder: EmbedderClient, tmp: Path) -> Indexer:
    return Indexer(
        pool, embedder, IndexSettings.from_env(Env({})), ExtractiveSummarizer(), tmp / "data"
    )


async def _index_repo(
    pool: asyncpg.Pool,
    embedder: EmbedderClient,
    root: Path,
    tmp: Path,
    *,
    slug: str = SLUG,
    public: bool = False,
) -> None:
    indexer = _indexer(pool, embedder, tmp)
    request = RepositoryRequest(str(root), slug, public=public)
    await indexer.index_repository(request, Job("j", "repository", slug))


async def _expected(
    conn: asyncpg.Connection, field: Field, owner_id: int
) -> tuple[int, int, dict[str, int]]:
    """Rows, total length and document frequencies (df > 1) counted from the rows
    themselves, independently of ts_stat."""
    rows = (
        f"FROM {field.table} WHERE {field.owner} = $1 AND {field.column} IS NOT NULL "
        f"AND generation <= (SELECT published_generation FROM "
        f"{'repositories' if field.owner == 'repository_id' else 'collections'} WHERE id = $1)"
    )
    count, total = await conn.fetchrow(
        f"SELECT count(*), coalesce(sum(length({field.column})), 0) {rows}", owner_id
    )
    df = await conn.fetch(
        f"SELECT lexeme, count(*) AS df FROM (SELECT unnest(tsvector_to_array({field.column}))"
        f" AS lexeme {rows}) x GROUP BY lexeme HAVING count(*) > 1",
        owner_id,
    )
    return int(count), int(total), {r["lexeme"]: int(r["df"]) for r in df}


async def _stored(
    conn: asyncpg.Connection, field: Field, owner_id: int
) -> tuple[int, int, dict[str, int]]:
    row = await conn.fetchrow(
        f"SELECT id, documents, total_length FROM lexical_fields "
        f"WHERE {field.owner} = $1 AND field = $2",
        owner_id,
        field.name,
    )
    assert row is not None, f"no statistics for {field.name}"
    df = await conn.fetch("SELECT lexeme, df FROM lexical_df WHERE field_id = $1", row["id"])
    return int(row["documents"]), int(row["total_length"]), {r["lexeme"]: r["df"] for r in df}


async def _check_all(conn: asyncpg.Connection, owner_id: int, fields: tuple[Field, ...]) -> None:
    for field in fields:
        assert await _stored(conn, field, owner_id) == await _expected(conn, field, owner_id)


async def _code_body_hits(conn: asyncpg.Connection, scope: Scope, query: str) -> list[StreamHit]:
    """The lexical stream over code bodies, BM25, the first 50 hits."""
    return await run_lexical(
        on_connection(conn), "code", "body", scope=scope, tsquery=code_tsquery(query), cap=50
    )


async def test_publication_keeps_statistics_of_the_published_rows(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "repo")
    write(root, "pkg/common.py", COMMON)
    write(root, "docs/guide.md", "# Widgets\n\nA widget has a value.\n\n## Knobs\n\nTurn it.\n")
    commit_all(root, "widgets", MAR)
    await _index_repo(retrieval_pool, embedder_client, root, tmp_path)
    async with retrieval_pool.acquire() as conn:
        repo_id = await conn.fetchval("SELECT id FROM repositories WHERE slug = $1", SLUG)
        await _check_all(conn, repo_id, REPOSITORY_FIELDS)
        documents, _, df = await _stored(conn, REPOSITORY_FIELDS[0], repo_id)
        assert documents > 6 and df["widget"] >= 6
        assert "frobnicate" not in df

        # An incremental run: one file added, one removed. The statistics follow.
        write(root, "pkg/rare.py", RARE + "\n\ndef frobnicate_twice(widget):\n    pass\n")
        (root / "pkg/common.py").unlink()
        commit_all(root, "frobnicate", MAR)
        await _index_repo(retrieval_pool, embedder_client, root, tmp_path)
        await _check_all(conn, repo_id, REPOSITORY_FIELDS)
        _, _, df = await _stored(conn, REPOSITORY_FIELDS[0], repo_id)
        # The module and its two functions; `again` was only in the removed file.
        assert df["frobnicate"] == 3 and "again" not in df

        # The migration's backfill computes what publication does.
        await conn.execute("DELETE FROM lexical_fields")
        backfill = (MIGRATIONS / "0009_term_statistics.sql").read_text()
        await conn.execute(backfill[backfill.index("-- Statistics of what is already") :])
        await _check_all(conn, repo_id, REPOSITORY_FIELDS)

        # A deleted repository takes its statistics with it.
        await conn.execute("DELETE FROM repositories WHERE id = $1", repo_id)
        assert await conn.fetchval("SELECT count(*) FROM lexical_fields") == 0
        assert await conn.fetchval("SELECT count(*) FROM lexical_df") == 0


async def test_collection_publication_keeps_statistics(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Retries\n\nRetry a failed charge.\n\n## Backoff\n\nWait.\n")
    (notes / "b.md").write_text("# Refunds\n\nA failed refund is retried.\n")
    await _indexer(retrieval_pool, embedder_client, tmp_path).index_collection(
        CollectionRequest(name="notes", directory=str(notes)), Job("c", "collection", "notes")
    )
    async with retrieval_pool.acquire() as conn:
        collection_id = await conn.fetchval("SELECT id FROM collections WHERE name = 'notes'")
        await _check_all(conn, collection_id, COLLECTION_FIELDS)
        _, _, df = await _stored(conn, COLLECTION_FIELDS[0], collection_id)
        assert df["fail"] >= 2  # 'english' stems failed -> fail


async def _top(pool: asyncpg.Pool, query: str) -> list[str]:
    async with pool.acquire() as conn:
        hits = await run_lexical(
            on_connection(conn),
            "code",
            "body",
            scope=Scope(ADMIN, repo=SLUG),
            tsquery=code_tsquery(query),
            cap=20,
        )
    assert all(hit.score > 0 for hit in hits)
    return [hit.span.qualified_name.rsplit(".", 1)[-1] for hit in hits if hit.span]


async def test_bm25_ranks_the_rare_word_first(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "repo")
    write(root, "pkg/common.py", COMMON)
    write(root, "pkg/rare.py", RARE)
    commit_all(root, "widgets", MAR)
    await _index_repo(retrieval_pool, embedder_client, root, tmp_path)
    query = "frobnicate the widget value"
    bm25 = await _top(retrieval_pool, query)
    # The functions repeating `widget value` match more of the query, more often; the
    # rare word outweighs them (ts_rank_cd, which counts how often and how close the words
    # are, ranked them first).
    assert bm25[0] == "frobnicate" and len(bm25) > 1, bm25


async def test_scores_are_bm25_over_the_searched_repositories_together(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    """Each score is Okapi BM25 (k1 1.2, b 0.75) recomputed here from the rows themselves,
    with document frequencies, row count and mean length summed over both repositories."""
    first = make_repo(tmp_path / "one")
    write(first, "pkg/common.py", COMMON)
    commit_all(first, "widgets", MAR)
    await _index_repo(retrieval_pool, embedder_client, first, tmp_path)
    second = make_repo(tmp_path / "two")
    write(second, "pkg/rare.py", RARE + "\n\ndef widget_value(widget, value):\n    pass\n")
    commit_all(second, "rare", MAR)
    await _index_repo(retrieval_pool, embedder_client, second, tmp_path, slug="local/test/bm25-two")
    query = "frobnicate the widget value"
    async with retrieval_pool.acquire() as conn:
        hits = await _code_body_hits(conn, Scope(ADMIN), query)
        assert {h.span.repository_id for h in hits if h.span} == set(
            await conn.fetchval("SELECT array_agg(id) FROM repositories")
        )
        n, total = await conn.fetchrow("SELECT count(*), sum(length(tsv)) FROM code_nodes")
        lexemes = ["frobnicate", "widget", "value"]
        df = {
            lexeme: await conn.fetchval(
                "SELECT count(*) FROM code_nodes WHERE tsv @@ $1::tsquery", lexeme
            )
            for lexeme in lexemes
        }
        avgdl = total / n
        for hit in hits:
            rows = await conn.fetch(
                "SELECT u.lexeme, array_length(u.positions, 1) AS tf, length(n.tsv) AS dl "
                "FROM code_nodes n, unnest(n.tsv) u WHERE n.id = $1 AND u.lexeme = ANY($2)",
                hit.id,
                lexemes,
            )
            expected = sum(
                math.log(1 + (n - df[r["lexeme"]] + 0.5) / (df[r["lexeme"]] + 0.5))
                * r["tf"]
                * 2.2
                / (r["tf"] + 1.2 * (0.25 + 0.75 * r["dl"] / avgdl))
                for r in rows
            )
            assert hit.score == pytest.approx(expected, rel=1e-9), hit


async def test_a_repository_the_caller_cannot_read_does_not_move_its_scores(
    retrieval_pool: asyncpg.Pool, embedder_client: EmbedderClient, tmp_path: Path
) -> None:
    """The statistics are summed over the repositories the caller's candidates come from,
    and candidates pass the access rule first: a private repository full of the query's
    rare word changes an admin's scores, never those of a key that cannot read it (its
    scores would otherwise tell what the private code holds)."""
    public = make_repo(tmp_path / "public")
    write(public, "pkg/common.py", COMMON)
    write(public, "pkg/rare.py", RARE)
    commit_all(public, "widgets", MAR)
    await _index_repo(
        retrieval_pool, embedder_client, public, tmp_path, slug="local/test/open", public=True
    )
    query = "frobnicate the widget value"

    async def scores(viewer: Viewer) -> dict[int, float]:
        async with retrieval_pool.acquire() as conn:
            hits = await _code_body_hits(conn, Scope(viewer), query)
        return {hit.id: hit.score for hit in hits}

    stranger = Viewer("mallory", False)
    before = await scores(stranger)
    assert before and before == await scores(ADMIN)
    hidden = make_repo(tmp_path / "hidden")
    write(
        hidden,
        "pkg/secret.py",
        "\n\n".join(f"def frobnicate_{i}(widget):\n    return {i}\n" for i in range(8)),
    )
    commit_all(hidden, "secret", MAR)
    await _index_repo(retrieval_pool, embedder_client, hidden, tmp_path, slug="local/test/hidden")
    assert await scores(stranger) == before
    admin = await scores(ADMIN)
    assert any(admin[i] != before[i] for i in before)  # the private rows do count for an admin

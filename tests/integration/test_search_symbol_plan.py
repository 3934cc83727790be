"""The symbol stream's statement runs on a generic plan, and it is the right one.

search_sql.SYMBOL_SETTINGS makes PostgreSQL plan the symbol query once per connection
(plan_cache_mode = force_generic_plan) instead of once per query text. A generic plan
cannot see the text, so it is checked on two tables of 20k small rows: names shaped like
real ones (`pkg3.mod17.Class5.read_file3`), where it must be the BitmapOr of the trigram
and lower(name) indexes; and six names filling the table, where it reads every row, which
is only acceptable because the custom plan, seeing the text, does so too. On both the
rows must not depend on the plan. A third table mixes short qualified names with long
ones: there a short query reads the trigram-count index, and its rows are those of the
statement without that band.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from cograph_api.access_rules import Viewer
from retrieval.search import search_sql
from retrieval.search.search_sql import Scope
from retrieval.search.snapshot import on_connection
from tests.integration.support.databases import retrieval_database

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROWS = 20_000
# Words of the varied names (`parse_config7`): 20 x 20 pairs, each with 50 numbers, and
# every 500th row a bare `ParseConfig`.
WORDS = [
    *("parse", "config", "handle", "render", "page", "load", "save", "request", "response"),
    *("server", "client", "token", "read", "write", "file", "path", "cache", "session"),
    *("user", "error"),
]
VARIED = (
    "CASE WHEN i % 500 = 0 THEN 'ParseConfig' ELSE ($3::text[])[1 + i % 20] || '_' || "
    "($3::text[])[1 + (i / 20) % 20] || (i / 400) % 50 END"
)
# Six names for the whole table.
REPETITIVE = "($3::text[])[1 + i % 6]"
# Short words as bare names, once in a while also as the whole qualified name (below).
SHORT = "($3::text[])[1 + i % 20] || CASE WHEN i % 3 = 0 THEN '' ELSE (i % 40)::text END"
NAMES = ("parse_config", "handle", "render_page", "ParseConfig", "load", "read_file")
# Each names something in its table: by similarity, by a bare name, by a dotted suffix.
QUERIES = {
    "varied": ("parse_config", "handle_request", "ParseConfig", "Class5.read_file3", "cache_user"),
    "repetitive": ("parse_config", "ParseConfig", "Class3.handle", "read_file"),
    # Short enough to be read through the trigram-count band (SYMBOL_BOUNDED_TRIGRAMS).
    "short": ("page", "load7", "cache", "token", "Pat", "sav", "path.file"),
}


@dataclass(frozen=True)
class Corpus:
    name: str
    pool: asyncpg.Pool


@pytest_asyncio.fixture(
    scope="module", loop_scope="session", params=["varied", "repetitive", "short"]
)
async def corpus(pg_server_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Corpus]:
    name: str = request.param
    async with retrieval_database(pg_server_url, prefix="sym") as (_, pool):
        async with pool.acquire() as conn:
            repositories = [
                await conn.fetchval(
                    "INSERT INTO repositories (slug, source, source_kind, public) "
                    "VALUES ($1, '/dev/null', 'dir', $2) RETURNING id",
                    f"example.com/sym/r{n}",
                    n != 0,  # the first (lowest id, first in place order) is private
                )
                for n in range(3)
            ]
            # Spread over the three repositories, seven rows at a time.
            await conn.execute(
                "INSERT INTO code_nodes (repository_id, path, language, qualified_name, "
                "name, kind, start_line, end_line, body, content_hash, tsv) "
                "SELECT ($1::bigint[])[1 + (i / 7) % 3], 'm' || i || '.py', 'python', "
                "CASE WHEN $4 AND i % 5 = 0 THEN n WHEN $4 AND i % 5 = 1 THEN 'm.' || n "
                "ELSE 'pkg' || i % 7 || '.mod' || i % 31 || '.Class' || i % 11 || '.' || n END, n, "
                "'method', 1, 2, 'pass', 'h', ''::tsvector "
                f"FROM generate_series(1, $2) AS i, LATERAL (SELECT "
                f"{ {'varied': VARIED, 'repetitive': REPETITIVE, 'short': SHORT}[name] } AS n) "
                "AS x",
                repositories,
                ROWS,
                list(NAMES if name == "repetitive" else WORDS),
                name == "short",
            )
            await conn.execute("ANALYZE")
        yield Corpus(name, pool)


def _literal(value: Any) -> str:
    """A bind value written as an SQL literal (EXECUTE takes no parameters)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'::text"


async def _plan(pool: asyncpg.Pool, settings: str, text: str = "ParseConfig") -> str:
    """The plan the symbol statement for `text` gets as a prepared statement under
    `settings` (generic or custom, as plan_cache_mode there says)."""
    sql, args = search_sql.symbol_sql(Scope(Viewer("reader", False)), text, 100)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(settings)
        await conn.execute(f"PREPARE symbol AS {sql}")
        rows = await conn.fetch(f"EXPLAIN EXECUTE symbol({', '.join(map(_literal, args))})")
        await conn.execute("DEALLOCATE symbol")
    return "\n".join(row[0] for row in rows)


# The symbol stream's settings, planning for each text instead.
CUSTOM_SETTINGS = search_sql.SYMBOL_SETTINGS.replace("force_generic_plan", "force_custom_plan")
assert CUSTOM_SETTINGS != search_sql.SYMBOL_SETTINGS


def _uses_trigrams(plan: str) -> bool:
    return "code_nodes_qname_trgm" in plan and "code_nodes_lower_name" in plan


async def test_the_generic_plan_is_as_good_as_the_custom_one(corpus: Corpus) -> None:
    plan = await _plan(corpus.pool, search_sql.SYMBOL_SETTINGS)
    # A generic plan keeps the placeholders; a custom one shows the values.
    assert "% $3" in plan and "'ParseConfig'" not in plan, plan
    custom = await _plan(corpus.pool, CUSTOM_SETTINGS)
    assert "'ParseConfig'" in custom, custom
    if corpus.name == "varied":
        assert _uses_trigrams(plan), plan
        assert "Seq Scan on code_nodes" not in plan, plan
    elif corpus.name == "repetitive":
        assert not _uses_trigrams(plan) and not _uses_trigrams(custom), (plan, custom)


@pytest.mark.parametrize("admin", [False, True])
async def test_generic_and_custom_plans_return_the_same_rows(corpus: Corpus, admin: bool) -> None:
    pool = corpus.pool
    scope = Scope(Viewer("reader", admin))
    private = await pool.fetchval("SELECT id FROM repositories WHERE NOT public")
    seen: set[int] = set()
    for text in QUERIES[corpus.name]:
        sql, args = search_sql.symbol_sql(scope, text, 100)
        async with pool.acquire() as conn:
            # Twice, so the second run reuses the statement and its kept generic plan.
            generic = [
                await search_sql.run_symbol(on_connection(conn), "body", scope, text, 100)
                for _ in range(2)
            ]
            async with conn.transaction():
                await conn.execute(CUSTOM_SETTINGS)
                custom = await conn.fetch(sql, *args)
        assert custom, text  # every query names something in the corpus
        for hits in generic:
            assert [(hit.id, hit.exact) for hit in hits] == [
                (row["id"], row["exact"]) for row in custom
            ], text
        seen.update(hit.span.repository_id for hit in generic[0] if hit.span is not None)
    # The private repository's rows are in the answers only for the admin.
    assert (private in seen) == admin, seen


@pytest.mark.parametrize("corpus", ["short"], indirect=True)
async def test_a_short_name_reads_only_names_of_a_trigram_count_that_can_match(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Similarity is at most min/max of the two trigram counts, so the band is exact: the
    rows are those of the statement without it, and the generic plan reads the count index
    for a short name."""
    plan = await _plan(corpus.pool, search_sql.SYMBOL_SETTINGS, "cache")
    assert "code_nodes_qname_trigrams" in plan and "Seq Scan on code_nodes" not in plan, plan
    scope = Scope(Viewer("reader", True))
    similar = 0
    for text in QUERIES["short"]:
        assert search_sql.trigram_count(text) <= search_sql.SYMBOL_BOUNDED_TRIGRAMS, text
        async with corpus.pool.acquire() as conn:
            bounded = await search_sql.run_symbol(on_connection(conn), "body", scope, text, 300)
            monkeypatch.setattr(search_sql, "SYMBOL_BOUNDED_TRIGRAMS", 0)
            unbounded = await search_sql.run_symbol(on_connection(conn), "body", scope, text, 300)
            monkeypatch.undo()
        assert unbounded, text
        assert [(h.id, h.score, h.exact) for h in bounded] == [
            (h.id, h.score, h.exact) for h in unbounded
        ], text
        similar += sum(1 for h in bounded if not h.exact)
    assert similar > 0  # rows found by similarity alone, not only names said outright

"""The SQL of search: one query per (store, unit, stream), hydration, graph, access grants.

Access control, the repository/collection scope and the temporal filters are spliced into
every query that scores (no stream can bypass access control, and the time filters apply
in every store's SQL), so a candidate list never holds a row the caller may not read and a
stream never spends its candidate cap on rows a filter would drop later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt

from cograph_api.access_rules import Viewer, collection_readable, repository_readable
from retrieval import term_statistics
from retrieval.layers import Store, Unit
from retrieval.search.fusion import Place, Span, StreamHit
from retrieval.search.query_text import symbol_text
from retrieval.search.snapshot import Connect

SYMBOL_THRESHOLD = 0.3  # a symbol hit needs pg_trgm similarity on qualified_name >= 0.3
# The symbol query's transaction. PostgreSQL would plan the query anew for every text (its
# custom plan costs no more than the generic one): 2-3 ms of a 10 ms query at 20k nodes.
# The generic plan is made once per pooled connection (asyncpg prepares and keeps each
# statement) and reused. It cannot see the text; on names like real ones it is the BitmapOr
# of the trigram and lower(name) indexes, and where a few names fill a table it reads
# every row, as the custom plan does there (tests/integration/test_search_symbol_plan.py).
SYMBOL_SETTINGS = (
    f"SET LOCAL pg_trgm.similarity_threshold = {SYMBOL_THRESHOLD}; "
    "SET LOCAL plan_cache_mode = force_generic_plan"
)
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$-]*(?:\.[A-Za-z_$][\w$-]*)*")


def _trigrams_sql(text: str) -> str:
    """SQL: how many distinct trigrams pg_trgm takes from `text` (0 for none); on
    `t.qualified_name` it is the expression retrieval migration 0015 indexes."""
    return f"coalesce(array_length(show_trgm({text}), 1), 0)"


# The trigram count of a name, indexed (retrieval migration 0015). Similarity is shared /
# (|name| + |query| - shared), at most min/max of the two counts, so only names whose count
# lies within [t * |query|, |query| / t] can reach the threshold t. For a short query that
# range ANDed with the trigram index leaves a narrow band of short names instead of every
# name sharing two of its trigrams (`AsInt`: 3,000 rows, each read and compared, 25 ms at
# 20k nodes; bounded, 2.6 ms, the same rows). For a long query the range spans most names
# and reading it costs more than it saves, so only queries of up to
# SYMBOL_BOUNDED_TRIGRAMS are bounded (bench/RESULTS.md, "Search latency").
SYMBOL_BOUNDED_TRIGRAMS = 10
# pg_trgm's words: runs of letters and digits (`_` and punctuation separate them).
_TRIGRAM_WORD = re.compile(r"[^\W_]+")


def trigram_count(text: str) -> int:
    """About how many trigrams pg_trgm takes from `text` (each word, padded, gives its
    length plus one; repeats are not removed): only which plan to ask for depends on it,
    never which rows come back."""
    return sum(len(word) + 1 for word in _TRIGRAM_WORD.findall(text))


# Where a code node lies and whether it is test code, returned with every code hit
# (containment and the test-code weight are decided on it without another query).
_SPAN_COLUMNS = (
    ", t.repository_id, t.path, t.start_line, t.end_line, t.kind, t.qualified_name, t.is_test"
)

# Where a row lies, per store (for code, columns of its span): what breaks a tie in score
# after the score itself. Not the id: ids follow the order in which an index run's workers
# happen to write, so two runs over the same text would order tied rows differently (and
# cut a different row at the cap).
_PLACE_COLUMNS: dict[Store, tuple[str, ...]] = {
    "code": ("repository_id", "path", "start_line", "end_line", "qualified_name"),
    "repo_docs": ("repository_id", "path", "start_line", "end_line"),
    "md_collections": ("collection_id", "path", "start_line", "end_line"),
}


def _place_select(store: Store, alias: str = "t") -> str:
    """`, <alias>.<column>` for each place column a stream query must add, under the
    column's own name: none for code, whose span columns (_SPAN_COLUMNS) hold them all."""
    if store == "code":
        return ""
    return "".join(f", {alias}.{column}" for column in _PLACE_COLUMNS[store])


def _place_order(store: Store) -> str:
    """ORDER BY keys after the score: the selected place columns, then the (unique) id."""
    return ", ".join([*_PLACE_COLUMNS[store], "id"])


def _place_of(row: asyncpg.Record, store: Store) -> Place:
    """A fetched row's place."""
    return tuple(row[column] for column in _PLACE_COLUMNS[store])


# Per unit: the vector column (the tsvector column is the lexical field's, term_statistics).
_VECTOR_COLUMN: dict[Unit, str] = {"body": "embedding", "summary": "summary_embedding"}


@dataclass(frozen=True)
class Scope:
    """Who reads, where, and when: the filters every stream query carries."""

    viewer: Viewer
    # A repository's slug, or an indexed ref's (`<slug>@<ref>`, indexing/refs.py); None:
    # every readable repository's default branch.
    repo: str | None = None
    collection: str | None = None
    as_of: datetime | None = None
    since: datetime | None = None
    until: datetime | None = None


class _Params:
    """Collects bind values and hands out their $n placeholders."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def _source(store: Store, scope: Scope, params: _Params) -> tuple[str, list[str]]:
    """FROM clause (row alias `t`) and WHERE conditions for `store` under `scope`."""
    principal, admin = params.add(scope.viewer.principal_id), params.add(scope.viewer.admin)
    if store == "md_collections":
        # Only the collection's published chunks (indexing/generations.py).
        where = [
            collection_readable("c", principal, admin),
            "t.generation <= c.published_generation",
        ]
        if scope.collection is not None:
            where.append(f"c.name = {params.add(scope.collection)}")
        source = "md_collection_chunks t JOIN collections c ON c.id = t.collection_id"
    else:
        # Only the repository's published index (indexing/generations.py).
        where = [
            repository_readable("r", principal, admin),
            "t.generation <= r.published_generation",
        ]
        if scope.repo is not None:
            where.append(f"r.slug = {params.add(scope.repo)}")
        else:
            # Default branches only: a repository's indexed refs (migration 0016) are
            # searched by naming the ref, and would repeat its results here.
            where.append("r.parent_id IS NULL")
        table = "code_nodes" if store == "code" else "repo_docs"
        source = f"{table} t JOIN repositories r ON r.id = t.repository_id"
    return source, where + _time_filters(store, scope, params)


def _changed(store: Store) -> str:
    """SQL: when row `t` last changed. Code nodes without history (plain directories)
    have neither time; then they are unknown in time and a temporal filter leaves them
    out."""
    return "coalesce(t.last_changed_at, t.created_at)" if store == "code" else "t.updated_at"


def _time_filters(store: Store, scope: Scope, params: _Params) -> list[str]:
    """WHERE conditions of the scope's as_of/since/until, on row `t`'s own columns."""
    changed = _changed(store)
    where = []
    if scope.as_of is not None:
        # "Existed at as_of" means the version we hold had been written by then: a node
        # changed after as_of shows text that did not exist at as_of, so it is left out.
        where.append(f"{changed} <= {params.add(scope.as_of)}")
    if scope.since is not None:
        where.append(f"{changed} >= {params.add(scope.since)}")
    if scope.until is not None:
        where.append(f"{changed} <= {params.add(scope.until)}")
    return where


# Per store: the table, the table that owns its rows (access, scope, publication), the
# owner column, and the owner's column counting the rows it published.
_OWNERS: dict[Store, tuple[str, str, str, str]] = {
    "code": ("code_nodes", "repositories", "repository_id", "node_count"),
    "repo_docs": ("repo_docs", "repositories", "repository_id", "doc_chunk_count"),
    "md_collections": ("md_collection_chunks", "collections", "collection_id", "chunk_count"),
}


# Where an iterative HNSW scan gives up (pgvector's default, set explicitly so that
# use_index reasons about the value in force): a filtered query that has visited this many
# tuples returns what it has found, even fewer than its LIMIT.
MAX_SCAN_TUPLES = 20_000


@dataclass(frozen=True)
class VectorStatement:
    """One vector stream query, ready to run: the transaction's settings, then the query.

    `indexed` says whether it must be served by the HNSW index (enable_sort off: the only
    plan left that yields rows in distance order is the index scan) or by an exact scan of
    a scope too small for the index to fill its candidate list (vector_statement)."""

    settings: str
    sql: str
    args: list[Any]
    indexed: bool


@dataclass(frozen=True)
class OwnerScope:
    """What a store's vector query needs to know of its owners (repositories or
    collections) under a scope: the ids the viewer may read, how many rows they published
    in the store, and how many rows the store's table holds (the planner's estimate)."""

    ids: tuple[int, ...]
    scope_rows: float
    table_rows: float


async def readable_owners(
    conn: asyncpg.Connection, stores: Sequence[Store], scope: Scope
) -> dict[Store, OwnerScope]:
    """The owners the viewer may read in scope, by the access rule, for every store in
    `stores`, in one statement (on the search's snapshot when `conn` reads it): a search
    resolves them once for all its vector streams."""
    params = _Params()
    principal, admin = params.add(scope.viewer.principal_id), params.add(scope.viewer.admin)
    parts: list[str] = []
    for n, store in enumerate(stores):
        table, owners, _, count_column = _OWNERS[store]
        if owners == "collections":
            where = [collection_readable("o", principal, admin)]
            if scope.collection is not None:
                where.append(f"o.name = {params.add(scope.collection)}")
        else:
            where = [repository_readable("o", principal, admin)]
            if scope.repo is not None:
                where.append(f"o.slug = {params.add(scope.repo)}")
            else:
                where.append("o.parent_id IS NULL")  # default branches only, as in _source
        parts.append(
            f"(SELECT coalesce(array_agg(o.id), '{{}}') AS ids_{n}, "
            f"coalesce(sum(o.{count_column}), 0)::float8 AS scope_rows_{n}, "
            f"(SELECT reltuples FROM pg_class WHERE oid = '{table}'::regclass)::float8 "
            f"AS table_rows_{n} FROM {owners} o WHERE {' AND '.join(where)}) AS s{n}"
        )
    if not parts:
        return {}
    row = await conn.fetchrow(f"SELECT * FROM {', '.join(parts)}", *params.values)
    return {
        store: OwnerScope(tuple(row[f"ids_{n}"]), row[f"scope_rows_{n}"], row[f"table_rows_{n}"])
        for n, store in enumerate(stores)
    }


async def vector_statement(
    conn: asyncpg.Connection,
    store: Store,
    unit: Unit,
    *,
    scope: Scope,
    vector: npt.NDArray[np.float32],
    cap: int,
) -> VectorStatement | None:
    """build_vector_statement with the owners resolved on `conn` (one query)."""
    owners = (await readable_owners(conn, [store], scope))[store]
    return build_vector_statement(store, unit, owners=owners, scope=scope, vector=vector, cap=cap)


def build_vector_statement(
    store: Store,
    unit: Unit,
    *,
    owners: OwnerScope,
    scope: Scope,
    vector: npt.NDArray[np.float32],
    cap: int,
) -> VectorStatement | None:
    """The cosine kNN query of a vector stream (score 1 - distance), or None when the
    viewer can read nothing in scope.

    The owners (repositories or collections) the viewer may read in scope are resolved
    first, by the access rule (readable_owners, once per search, on the search's
    snapshot); the kNN query then filters the store's table on its own columns: the owner
    id among them, the row's generation at most its owner's published one (looked up by
    primary key for each row the scan yields), the time filters. No join sits between the
    index and the LIMIT, and the filter is evaluated inside the iterative index scan, so
    how many rows the planner expects a join to keep no longer decides the plan (at 20k
    nodes a join's estimate once turned the plan into a sequential scan and a sort of
    every row).

    The index serves the query unless the scope holds so small a share of the table that
    the iterative scan would stop (hnsw.max_scan_tuples) before finding `cap` of its rows;
    there an exact scan of the scope is both complete and cheaper. ORDER BY the bare
    distance so the index can serve it; ties and relaxed-order inversions are sorted out
    in Python (run_vector)."""
    if not owners.ids:
        return None
    table, owner_table, owner_column, _ = _OWNERS[store]
    indexed = use_index(
        scope_rows=owners.scope_rows,
        table_rows=owners.table_rows,
        max_scan_tuples=MAX_SCAN_TUPLES,
        cap=cap,
    )
    params = _Params()
    column = f"t.{_VECTOR_COLUMN.get(unit, 'embedding')}"
    query = params.add(vector)
    where = [
        f"{column} IS NOT NULL",
        f"t.{owner_column} = ANY({params.add(list(owners.ids))}::bigint[])",
        # Only the owner's published rows (indexing/generations.py). One index lookup per
        # row the scan yields, on the same snapshot as the ids above.
        f"t.generation <= (SELECT o.published_generation FROM {owner_table} o "
        f"WHERE o.id = t.{owner_column})",
        *_time_filters(store, scope, params),
    ]
    span = _SPAN_COLUMNS if store == "code" else ""
    sql = (
        f"SELECT t.id, 1 - ({column} <=> {query}) AS score{span}{_place_select(store)} "
        f"FROM {table} t WHERE {' AND '.join(where)} "
        f"ORDER BY {column} <=> {query} LIMIT {params.add(cap)}"
    )
    # HNSW returns at most ef_search rows and filters after the index scan: without the
    # iterative scan a filtered query silently returns fewer than `cap` candidates.
    settings = (
        f"SET LOCAL hnsw.ef_search = {max(int(cap), 40)}; "
        "SET LOCAL hnsw.iterative_scan = relaxed_order; "
        f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}"
    )
    if indexed:
        settings += "; SET LOCAL enable_sort = off"
    return VectorStatement(settings, sql, params.values, indexed)


def use_index(*, scope_rows: float, table_rows: float, max_scan_tuples: float, cap: int) -> bool:
    """Whether the HNSW index should serve a kNN over `scope_rows` of `table_rows` rows.

    To collect `cap` rows of the scope, an iterative scan visits about
    cap * table_rows / scope_rows tuples, and stops at max_scan_tuples: when that would
    take more than half of them, the candidate list could come back short, and an exact
    scan of the scope (a small share of the table, through the owner's index) is the
    better plan. A table never analysed (reltuples -1) is taken to be the scope."""
    if table_rows <= 0:
        return True
    return cap * table_rows <= scope_rows * max_scan_tuples / 2


# BM25's customary constants: term frequency saturates at k1 + 1, length normalisation b.
BM25_K1, BM25_B = 1.2, 0.75
# The lexemes of a tsquery, read from its text form: 'parse' & 'config' | ...
_TSQUERY_LEXEMES = r"'([^']+)'"


def lexical_sql(
    store: Store,
    unit: Unit,
    scope: Scope,
    tsquery: str,
    cap: int,
) -> tuple[str, list[Any]]:
    """The rows matching the tsquery (`simple` on code, `english` on documents), best first.

    They are scored by Okapi BM25 over the query's lexemes. The term
    statistics are the field's over the repositories (or the collection) the candidates
    come from, summed from what publication keeps per repository (term_statistics.py), so
    rows of several repositories are ranked as one corpus, on one scale; a lexeme stored
    for none counts as appearing once. A row's length is its tsvector's (distinct lexemes)
    and a term's frequency the number of its positions. (PostgreSQL's ts_rank_cd, which
    weighs every word alike however common it is, lost to it on every query class:
    bench/notes/quality-unseen.md, "BM25 in the lexical stream".)"""
    params = _Params()
    source, where = _source(store, scope, params)
    field = term_statistics.field_of(store, unit)
    column = f"t.{field.column}"
    config = "simple" if store == "code" else "english"
    span = _SPAN_COLUMNS if store == "code" else ""
    query = f"to_tsquery('{config}', {params.add(tsquery)})"
    span_out = span.replace("t.", "c.")
    # MATERIALIZED: each step is computed once; inlined, the statistics lookups would run
    # once per candidate row.
    sql = f"""
        WITH q AS MATERIALIZED (SELECT {query} AS q),
        lex AS MATERIALIZED (
            SELECT DISTINCT m[1] AS lexeme
            FROM q, regexp_matches(q.q::text, {params.add(_TSQUERY_LEXEMES)}, 'g') AS m
        ),
        cand AS MATERIALIZED (
            SELECT t.id, {column} AS tsv, t.{field.owner} AS owner{span}{_place_select(store)}
            FROM {source}, q
            WHERE {column} @@ q.q AND {" AND ".join(where)}
        ),
        corpus AS MATERIALIZED (
            SELECT array_agg(f.id) AS ids, sum(f.documents)::float8 AS n,
                   greatest(sum(f.total_length)::float8 / greatest(sum(f.documents), 1), 1)
                       AS avgdl
            FROM lexical_fields f
            WHERE f.field = {params.add(field.name)}
              AND f.{field.owner} IN (SELECT DISTINCT owner FROM cand)
        ),
        lexemes AS MATERIALIZED (SELECT array_agg(lexeme) AS l FROM lex),
        idf AS MATERIALIZED (
            SELECT l.lexeme, c.avgdl,
                   ln(1 + greatest(c.n - x.df + 0.5, 0) / (x.df + 0.5)) AS idf
            FROM corpus c CROSS JOIN lex l
            CROSS JOIN LATERAL (
                SELECT greatest(coalesce(sum(d.df), 0), 1)::float8 AS df FROM lexical_df d
                WHERE d.field_id = ANY(c.ids) AND d.lexeme = l.lexeme
            ) x
        ),
        scored AS (
            SELECT c.id, sum(
                i.idf * x.tf * {BM25_K1 + 1}
                / (x.tf + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * length(c.tsv) / i.avgdl))
            ) AS score
            FROM cand c CROSS JOIN lexemes q
            CROSS JOIN LATERAL (
                SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS tf
                FROM unnest({_only(q_lexemes="q.l", tsv="c.tsv")}) AS u
            ) x
            JOIN idf i ON i.lexeme = x.lexeme
            GROUP BY c.id
        )
        SELECT c.id, s.score{span_out}{_place_select(store, "c")}
        FROM scored s JOIN cand c ON c.id = s.id
        ORDER BY score DESC, {_place_order(store)} LIMIT {params.add(cap)}
    """
    return sql, params.values


def _only(*, q_lexemes: str, tsv: str) -> str:
    """SQL: the tsvector `tsv` reduced to the lexemes of the array `q_lexemes`, positions
    kept: every weight set to D, the query's lexemes' to A, then only the A ones kept. All
    of it in C over the tsvector, so BM25 unnests a candidate's few query lexemes rather
    than every lexeme it holds (a prose question matches a thousand rows of a few hundred
    lexemes each). Code tsvectors always carry positions (lexemes.lexical_text weights
    them), which setweight needs."""
    return f"ts_filter(setweight(setweight({tsv}, 'D'), 'A', {q_lexemes}), '{{a}}')"


def symbol_identifier(text: str) -> str | None:
    """The query as a dotted identifier, case kept (`ParseConfig`, `billing.retry.Backoff`,
    `Server::Handle`, `Server.Handle`, `lru-cache.LRUCache.get`: package directories may
    carry hyphens), or None when it is not one (prose, signatures)."""
    candidate = text.strip().replace("::", ".").replace("#", ".")
    return candidate if _IDENTIFIER.fullmatch(candidate) else None


def _names(ident: str, name: str, qualified: str) -> str:
    """SQL: the node named `ident` by its name, its qualified name or a dotted suffix."""
    return (
        f"({name} = {ident} OR {qualified} = {ident} "
        f"OR right({qualified}, length({ident}) + 1) = '.' || {ident})"
    )


def symbol_sql(scope: Scope, text: str, cap: int) -> tuple[str, list[Any]]:
    """Trigram similarity on qualified_name; `%` (with pg_trgm.similarity_threshold set to
    0.3 in the transaction) is what lets the planner use the trigram GIN index.

    `exact` marks nodes the query names outright -- its bare name, its qualified name, or a
    dotted suffix of it (`Server.Handle` names `pkg.Server.Handle`): 3 when the case agrees
    too, 2 for an `impl` block that agrees (a Rust `impl Error` is named after the type it
    implements: the type's definition comes first), 1 when it agrees only ignoring case
    (`Color` the class over `color` the method).
    Those are candidates whatever their similarity (a short bare name is far, in trigrams,
    from a long qualified name), found through the lower(name) index, and lead the stream."""
    text = symbol_text(text)  # the stream's cost grows with the query's trigrams
    params = _Params()
    source, where = _source("code", scope, params)
    query = params.add(text)
    # A name that is not an identifier (a computed member, `Minipass.[RESUME]`) is still
    # named outright when the query is exactly it.
    identifier = symbol_identifier(text)
    named = identifier or text.strip()
    raw = params.add(named)
    ident = params.add(named.lower())
    last = params.add((identifier.rsplit(".", 1)[-1] if identifier else named).lower())
    exact = (
        f"CASE WHEN {_names(raw, 't.name', 't.qualified_name')} AND t.kind <> 'impl' THEN 3 "
        f"WHEN {_names(raw, 't.name', 't.qualified_name')} THEN 2 "
        f"WHEN {_names(ident, 'lower(t.name)', 'lower(t.qualified_name)')} THEN 1 ELSE 0 END"
    )
    named_outright = f"lower(t.name) = {last}::text"
    if identifier and "." in identifier:
        # A dotted query names a member of something: a node of the same bare name comes in
        # only when its qualified name ends with the whole of it (`RetryPolicy.delay` is not
        # every `delay`); the rest must be similar enough.
        named_outright += f" AND {_names(ident, 'lower(t.name)', 'lower(t.qualified_name)')}"
    trigrams = trigram_count(text)
    if trigrams == 0:
        # No letter or digit: pg_trgm takes no trigram from it, no name is similar to it,
        # and the index would hand every row to the recheck (18 ms at 20k nodes for `::`).
        similar = "false"
    elif trigrams <= SYMBOL_BOUNDED_TRIGRAMS:
        count = _trigrams_sql(query)
        similar = (
            f"t.qualified_name % {query} AND {_trigrams_sql('t.qualified_name')} "
            f"BETWEEN floor({SYMBOL_THRESHOLD} * {count})::int "
            f"AND ceil({count} / {SYMBOL_THRESHOLD})::int"
        )
    else:
        similar = f"t.qualified_name % {query}"
    sql = (
        f"SELECT t.id, similarity(t.qualified_name, {query}) AS score, {exact} AS exact"
        f"{_SPAN_COLUMNS} FROM {source} "
        f"WHERE (({similar}) OR ({named_outright})) "
        f"AND {' AND '.join(where)} "
        f"ORDER BY exact DESC, score DESC, {_place_order('code')} LIMIT {params.add(cap)}"
    )
    return sql, params.values


async def run_vector(
    connect: Connect,
    store: Store,
    unit: Unit,
    *,
    scope: Scope,
    vector: npt.NDArray[np.float32],
    cap: int,
    owners: OwnerScope | None = None,
) -> list[StreamHit]:
    """The vector stream's hits; `owners` as the search resolved them (readable_owners),
    or None to resolve them here first."""
    if owners is None:
        async with connect() as conn:
            owners = (await readable_owners(conn, [store], scope))[store]
    statement = build_vector_statement(
        store, unit, owners=owners, scope=scope, vector=vector, cap=cap
    )
    if statement is None:
        return []
    async with connect(statement.settings) as conn:
        rows = await conn.fetch(statement.sql, *statement.args)
    hits = [_hit(row, unit, store) for row in rows]
    hits.sort(key=lambda hit: (-hit.score, hit.place, hit.id))
    return hits


def _hit(row: asyncpg.Record, unit: Unit, store: Store, exact: int = 0) -> StreamHit:
    """A fetched stream row (id, score, the store's place columns, code's span) as a hit.

    Every candidate of every stream passes here (up to the cap per stream), so a code row's
    place is built from the span's values rather than looked up a second time."""
    if store != "code":
        return StreamHit(
            unit, row["id"], float(row["score"]), exact, None, store, _place_of(row, store)
        )
    repository_id, path = row["repository_id"], row["path"]
    start, end, qualified = row["start_line"], row["end_line"], row["qualified_name"]
    return StreamHit(
        unit,
        row["id"],
        float(row["score"]),
        exact,
        Span(repository_id, path, start, end, row["kind"], qualified, row["is_test"]),
        store,
        # _PLACE_COLUMNS["code"], in its order.
        (repository_id, path, start, end, qualified),
    )


async def run_lexical(
    connect: Connect,
    store: Store,
    unit: Unit,
    *,
    scope: Scope,
    tsquery: str,
    cap: int,
) -> list[StreamHit]:
    sql, args = lexical_sql(store, unit, scope, tsquery, cap)
    async with connect() as conn:
        rows = await conn.fetch(sql, *args)
    return [_hit(row, unit, store) for row in rows]


async def run_symbol(
    connect: Connect, unit: Unit, scope: Scope, text: str, cap: int
) -> list[StreamHit]:
    sql, args = symbol_sql(scope, text, cap)
    async with connect(SYMBOL_SETTINGS) as conn:
        rows = await conn.fetch(sql, *args)
    return [_hit(row, unit, "code", int(row["exact"])) for row in rows]


async def hydrate(
    conn: asyncpg.Connection, store: Store, ids: Sequence[int], scope: Scope
) -> dict[int, asyncpg.Record]:
    """The display fields of the given rows, still under the access filter."""
    if not ids:
        return {}
    params = _Params()
    source, where = _source(store, scope, params)
    id_list = params.add(list(ids))
    if store == "code":
        columns = (
            "t.id, t.path, t.language, t.qualified_name, t.name, t.kind, t.start_line, "
            "t.end_line, t.signature, t.body, t.summary, r.slug AS repo, "
            "r.commit_sha AS commit, '' AS collection"
        )
    elif store == "repo_docs":
        columns = (
            "t.id, t.path, t.heading_path, t.start_line, t.end_line, t.body, "
            "r.slug AS repo, r.commit_sha AS commit, '' AS collection"
        )
    else:
        columns = (
            "t.id, t.path, t.heading_path, t.start_line, t.end_line, t.body, "
            "'' AS repo, '' AS commit, c.name AS collection"
        )
    sql = f"SELECT {columns} FROM {source} WHERE t.id = ANY({id_list}) AND {' AND '.join(where)}"
    rows = await conn.fetch(sql, *params.values)
    return {int(row["id"]): row for row in rows}

"""Term statistics for BM25 in the lexical stream: what each field of an index holds.

A *field* is one tsvector column of one table, per repository (or collection): the code
nodes' text, their summaries, the repository's documents, a collection's chunks. For each
published index the `lexical_fields` row holds how many rows have the field and their
total length (lexemes per row: the tsvector's length), and `lexical_df` in how many rows
each lexeme appears (migration 0009). BM25 needs both, and counting them per query would
read every row holding a common word; they change only when an index is published, so
they are written then, in the publishing transaction (index_store.finish_repository,
finish_collection), and always describe exactly the published rows. A search sums them
over the repositories its candidates come from (search_sql.lexical_sql), so rows of
several repositories are scored as one corpus.

A lexeme found in a single row is not stored (about half of a code vocabulary is
identifiers used once): a lexeme stored for none of the repositories counts as appearing
once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import asyncpg

from retrieval.layers import Store, Unit

Owner = Literal["repository_id", "collection_id"]


@dataclass(frozen=True)
class Field:
    """One tsvector column of one table (names from code, never input)."""

    name: str  # lexical_fields.field
    table: str
    owner: Owner  # the column naming the repository or collection
    column: str  # the tsvector


CODE = Field("code", "code_nodes", "repository_id", "tsv")
CODE_SUMMARY = Field("code_summary", "code_nodes", "repository_id", "summary_tsv")
REPO_DOCS = Field("repo_docs", "repo_docs", "repository_id", "tsv")
MD_CHUNKS = Field("md_chunks", "md_collection_chunks", "collection_id", "tsv")

_FIELD_OF: dict[tuple[Store, Unit], Field] = {
    ("code", "body"): CODE,
    ("code", "summary"): CODE_SUMMARY,
    ("repo_docs", "doc"): REPO_DOCS,
    ("md_collections", "doc"): MD_CHUNKS,
}
REPOSITORY_FIELDS = (CODE, CODE_SUMMARY, REPO_DOCS)
COLLECTION_FIELDS = (MD_CHUNKS,)


def field_of(store: Store, unit: Unit) -> Field:
    """The field a lexical query over (store, unit) ranks by."""
    try:
        return _FIELD_OF[(store, unit)]
    except KeyError:
        raise ValueError(f"no lexical field for {store}/{unit}") from None


async def refresh(
    conn: asyncpg.Connection, fields: tuple[Field, ...], owner_id: int, generation: int
) -> None:
    """Recounts `fields` of one repository or collection over its rows up to `generation`
    (the one being published). Run it in the publishing transaction, after the replaced
    rows are deleted."""
    owner_id, generation = int(owner_id), int(generation)
    for field in fields:
        rows = (
            f"FROM {field.table} WHERE {field.owner} = {owner_id} "
            f"AND generation <= {generation} AND {field.column} IS NOT NULL"
        )
        field_id = await conn.fetchval(
            f"""
            INSERT INTO lexical_fields ({field.owner}, field, documents, total_length)
            SELECT $1, $2, count(*), coalesce(sum(length({field.column})), 0) {rows}
            ON CONFLICT ({field.owner}, field) DO UPDATE SET
                documents = EXCLUDED.documents, total_length = EXCLUDED.total_length
            RETURNING id
            """,
            owner_id,
            field.name,
        )
        await conn.execute("DELETE FROM lexical_df WHERE field_id = $1", field_id)
        # ts_stat reads its rows from a query string; every part of it is a name from code
        # or an integer.
        await conn.execute(
            "INSERT INTO lexical_df (field_id, lexeme, df) "
            "SELECT $1, word, ndoc FROM ts_stat($2) WHERE ndoc > 1",
            field_id,
            f"SELECT {field.column} {rows}",
        )

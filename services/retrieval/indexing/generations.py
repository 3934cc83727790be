"""Atomic publication of a repository's (and a collection's) index: generations.

Every row of a repository's code store and repo_docs carries the generation (index run)
that wrote it, and searches read only rows whose generation is at most the repository's
`published_generation` (search_sql, graph). A run:

1. `begin` (in the transaction that reads the stored hashes): deletes what an earlier,
   abandoned run wrote above the published generation and marks the files it had
   touched as changed (content hash ''), so they are indexed again; returns the run's
   generation, published + 1.
2. writes the changed files as that generation (index_store.write_files), beside the
   previous rows, which searches keep reading;
3. `publish` (one transaction with linking and index_store.finish_repository): deletes the
   older rows of the files it rewrote and of the files that are gone, then switches the
   published generation. Searches see the previous version up to that commit and the new
   one from it; a crash anywhere before leaves the previous version (or, for a first
   index, nothing) searchable. The run's file texts (what read and grep answer from) wait
   in file_contents_staged and move into file_contents in the same transaction.

Collections run the same scheme over md_collection_chunks, collection_documents and
collection_document_contents(_staged), switched by collections.published_generation:
`Published` names each kind's tables, and one set of statements serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class Published:
    """The tables one kind of index publishes by generation (names from code, never input)."""

    owner: str  # the row holding published_generation
    key: str  # the owner's id column in every other table
    documents: str  # one row per file or document, with its content hash and generation
    rows: tuple[str, ...]  # what searches read, filtered on generation
    contents: str  # the texts read and grep answer from
    staged: str  # a running index's texts, until it is published


REPOSITORIES = Published(
    "repositories",
    "repository_id",
    "files",
    ("code_nodes", "repo_docs"),
    "file_contents",
    "file_contents_staged",
)
COLLECTIONS = Published(
    "collections",
    "collection_id",
    "collection_documents",
    ("md_collection_chunks",),
    "collection_document_contents",
    "collection_document_contents_staged",
)


async def _published(conn: asyncpg.Connection, kind: Published, owner_id: int) -> int:
    """The published generation, its owner row locked (the caller's transaction)."""
    published = await conn.fetchval(
        f"SELECT published_generation FROM {kind.owner} WHERE id = $1 FOR UPDATE", owner_id
    )
    assert published is not None
    return int(published)


async def _discard(
    conn: asyncpg.Connection, kind: Published, owner_id: int, published: int
) -> None:
    """Deletes what an abandoned run wrote above `published` and marks the documents it
    had touched as changed (content hash ''), so they are indexed again."""
    for table in kind.rows:
        await conn.execute(
            f"DELETE FROM {table} WHERE {kind.key} = $1 AND generation > $2",
            owner_id,
            published,
        )
    await conn.execute(f"DELETE FROM {kind.staged} WHERE {kind.key} = $1", owner_id)
    await conn.execute(
        f"UPDATE {kind.documents} SET content_hash = '' WHERE {kind.key} = $1 AND generation > $2",
        owner_id,
        published,
    )


async def _replace(
    conn: asyncpg.Connection, kind: Published, owner_id: int, generation: int, removed: list[str]
) -> None:
    """Deletes the rows `generation` replaces (older rows of the documents it rewrote, every
    row of the `removed` ones), moves its staged texts into place and drops the removed
    documents."""
    for table in kind.rows:
        await conn.execute(
            f"""
            DELETE FROM {table} t USING {kind.documents} d
            WHERE t.{kind.key} = $1 AND t.generation < $2
              AND d.{kind.key} = $1 AND d.path = t.path
              AND (d.generation = $2 OR d.path = ANY($3::text[]))
            """,
            owner_id,
            generation,
            removed,
        )
    # The run's texts become the ones read and grep answer from.
    await conn.execute(
        f"""
        INSERT INTO {kind.contents} ({kind.key}, path, content, line_count)
        SELECT {kind.key}, path, content, line_count FROM {kind.staged}
        WHERE {kind.key} = $1 AND generation = $2
        ON CONFLICT ({kind.key}, path) DO UPDATE SET
            content = EXCLUDED.content, line_count = EXCLUDED.line_count
        """,
        owner_id,
        generation,
    )
    await conn.execute(f"DELETE FROM {kind.staged} WHERE {kind.key} = $1", owner_id)
    if removed:
        await conn.execute(
            f"DELETE FROM {kind.documents} WHERE {kind.key} = $1 AND path = ANY($2::text[])",
            owner_id,
            removed,
        )


# ---- repositories ----


async def begin(conn: asyncpg.Connection, repository_id: int) -> int:
    """The generation this run writes (caller's transaction, which it locks the row in)."""
    published = await _published(conn, REPOSITORIES, repository_id)
    # Edges first: cascading them row by row from code_nodes is the slow path.
    await conn.execute(
        """
        DELETE FROM code_edges e USING code_nodes n
        WHERE n.id = e.src_node_id AND n.repository_id = $1 AND n.generation > $2
        """,
        repository_id,
        published,
    )
    await _discard(conn, REPOSITORIES, repository_id, published)
    return published + 1


async def publish_rows(
    conn: asyncpg.Connection, repository_id: int, generation: int, removed: list[str]
) -> None:
    """Deletes the rows `generation` replaces: older rows of the files it rewrote, and
    every row of the `removed` files; moves its staged texts into place. Run it in the
    transaction that then switches the published generation
    (index_store.finish_repository)."""
    await conn.execute(
        """
        DELETE FROM code_edges e USING code_nodes n, files f
        WHERE n.id = e.src_node_id AND n.repository_id = $1 AND n.generation < $2
          AND f.repository_id = $1 AND f.path = n.path
          AND (f.generation = $2 OR f.path = ANY($3::text[]))
        """,
        repository_id,
        generation,
        removed,
    )
    await _replace(conn, REPOSITORIES, repository_id, generation, removed)


# ---- collections ----


async def begin_collection(conn: asyncpg.Connection, collection_id: int) -> int:
    """The generation a collection run writes (caller's transaction, which locks the row)."""
    published = await _published(conn, COLLECTIONS, collection_id)
    await _discard(conn, COLLECTIONS, collection_id, published)
    return published + 1


async def publish_collection_rows(
    conn: asyncpg.Connection, collection_id: int, generation: int, removed: list[str]
) -> None:
    """As publish_rows, for a collection (index_store.finish_collection then switches)."""
    await _replace(conn, COLLECTIONS, collection_id, generation, removed)

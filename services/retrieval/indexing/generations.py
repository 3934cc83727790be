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

Collections run the same scheme (`begin_collection`, `publish_collection_rows`) over
md_collection_chunks, collection_documents and collection_document_contents(_staged),
switched by collections.published_generation.
"""

from __future__ import annotations

import asyncpg


async def begin(conn: asyncpg.Connection, repository_id: int) -> int:
    """The generation this run writes (caller's transaction, which it locks the row in)."""
    published = await conn.fetchval(
        "SELECT published_generation FROM repositories WHERE id = $1 FOR UPDATE", repository_id
    )
    assert published is not None
    await conn.execute(
        """
        DELETE FROM code_edges e USING code_nodes n
        WHERE n.id = e.src_node_id AND n.repository_id = $1 AND n.generation > $2
        """,
        repository_id,
        published,
    )
    for table in ("code_nodes", "repo_docs"):
        await conn.execute(
            f"DELETE FROM {table} WHERE repository_id = $1 AND generation > $2",
            repository_id,
            published,
        )
    await conn.execute("DELETE FROM file_contents_staged WHERE repository_id = $1", repository_id)
    await conn.execute(
        "UPDATE files SET content_hash = '' WHERE repository_id = $1 AND generation > $2",
        repository_id,
        published,
    )
    return int(published) + 1


async def publish_rows(
    conn: asyncpg.Connection, repository_id: int, generation: int, removed: list[str]
) -> None:
    """Deletes the rows `generation` replaces: older rows of the files it rewrote, and
    every row of the `removed` files. Run it in the transaction that then switches the
    published generation (index_store.finish_repository)."""
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
    for table in ("code_nodes", "repo_docs"):
        await conn.execute(
            f"""
            DELETE FROM {table} t USING files f
            WHERE t.repository_id = $1 AND t.generation < $2
              AND f.repository_id = $1 AND f.path = t.path
              AND (f.generation = $2 OR f.path = ANY($3::text[]))
            """,
            repository_id,
            generation,
            removed,
        )
    # The run's file texts become the ones read and grep answer from.
    await conn.execute(
        """
        INSERT INTO file_contents (repository_id, path, content, line_count)
        SELECT repository_id, path, content, line_count FROM file_contents_staged
        WHERE repository_id = $1 AND generation = $2
        ON CONFLICT (repository_id, path) DO UPDATE SET
            content = EXCLUDED.content, line_count = EXCLUDED.line_count
        """,
        repository_id,
        generation,
    )
    await conn.execute("DELETE FROM file_contents_staged WHERE repository_id = $1", repository_id)
    if removed:
        await conn.execute(
            "DELETE FROM files WHERE repository_id = $1 AND path = ANY($2::text[])",
            repository_id,
            removed,
        )


# ---- collections: the same scheme over chunks, documents and their staged texts ----


async def begin_collection(conn: asyncpg.Connection, collection_id: int) -> int:
    """The generation a collection run writes (caller's transaction, which locks the row):
    what an abandoned run wrote above the published generation goes, and its documents
    are marked changed so this run writes them again."""
    published = await conn.fetchval(
        "SELECT published_generation FROM collections WHERE id = $1 FOR UPDATE", collection_id
    )
    assert published is not None
    await conn.execute(
        "DELETE FROM md_collection_chunks WHERE collection_id = $1 AND generation > $2",
        collection_id,
        published,
    )
    await conn.execute(
        "DELETE FROM collection_document_contents_staged WHERE collection_id = $1",
        collection_id,
    )
    await conn.execute(
        "UPDATE collection_documents SET content_hash = '' "
        "WHERE collection_id = $1 AND generation > $2",
        collection_id,
        published,
    )
    return int(published) + 1


async def publish_collection_rows(
    conn: asyncpg.Connection, collection_id: int, generation: int, removed: list[str]
) -> None:
    """Deletes the chunks `generation` replaces (older chunks of the documents it rewrote,
    every chunk of the `removed` ones), moves its staged texts into place and drops the
    removed documents. Run it in the transaction that then switches the published
    generation (index_store.finish_collection)."""
    await conn.execute(
        """
        DELETE FROM md_collection_chunks t USING collection_documents d
        WHERE t.collection_id = $1 AND t.generation < $2
          AND d.collection_id = $1 AND d.path = t.path
          AND (d.generation = $2 OR d.path = ANY($3::text[]))
        """,
        collection_id,
        generation,
        removed,
    )
    await conn.execute(
        """
        INSERT INTO collection_document_contents (collection_id, path, content, line_count)
        SELECT collection_id, path, content, line_count
        FROM collection_document_contents_staged
        WHERE collection_id = $1 AND generation = $2
        ON CONFLICT (collection_id, path) DO UPDATE SET
            content = EXCLUDED.content, line_count = EXCLUDED.line_count
        """,
        collection_id,
        generation,
    )
    await conn.execute(
        "DELETE FROM collection_document_contents_staged WHERE collection_id = $1",
        collection_id,
    )
    if removed:
        await conn.execute(
            "DELETE FROM collection_documents WHERE collection_id = $1 AND path = ANY($2::text[])",
            collection_id,
            removed,
        )

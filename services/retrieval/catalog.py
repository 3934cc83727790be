"""The catalog: what is indexed, who may see it, and deleting it (SQL).

Every read filters with the access rules inside the query, so a key never learns of a
repository or collection it may not read.
"""

from __future__ import annotations

import asyncpg

from cograph_api.access_rules import Access, Viewer, collection_readable, repository_readable
from retrieval.indexing.refs import split_ref_slug

_ACCESS_SQL = {
    "repository": """
        SELECT r.public, (SELECT g.role FROM grants g
                          WHERE g.repository_id = r.id AND g.principal_id = $2::text) AS role
        FROM repositories r WHERE r.slug = $1
    """,
    "collection": """
        SELECT c.public, (SELECT g.role FROM grants g
                          WHERE g.collection_id = c.id AND g.principal_id = $2::text) AS role
        FROM collections c WHERE c.name = $1
    """,
}


async def access_of(conn: asyncpg.Connection, kind: str, name: str, viewer: Viewer) -> Access:
    """What `viewer` may do with the repository (slug) or collection (name) `name`. An
    indexed ref's slug (`<slug>@<ref>`, indexing/refs.py) answers for its repository:
    a ref is read and written under its repository's access, even before its first run."""
    if kind == "repository":
        name = split_ref_slug(name)[0]
    row = await conn.fetchrow(_ACCESS_SQL[kind], name, viewer.principal_id)
    if row is None:
        return Access.of(viewer, exists=False, public=False, role=None)
    return Access.of(viewer, exists=True, public=row["public"], role=row["role"])


async def repository_id_by_slug(conn: asyncpg.Connection, slug: str) -> int | None:
    value: int | None = await conn.fetchval("SELECT id FROM repositories WHERE slug = $1", slug)
    return value


async def repository_readable_by(conn: asyncpg.Connection, slug: str, viewer: Viewer) -> bool:
    return bool(
        await conn.fetchval(
            f"SELECT 1 FROM repositories r WHERE r.slug = $3 AND "
            f"{repository_readable('r', '$1', '$2')}",
            viewer.principal_id,
            viewer.admin,
            slug,
        )
    )


_REPOSITORY_COLUMNS = """
    r.id, r.slug, r.branch, r.source, r.source_kind, r.commit_sha, r.indexed_at, r.public,
    r.file_count, r.node_count, r.edge_count, r.doc_chunk_count, r.reindex_reason,
    r.last_checked_at, r.last_synced_at,
    COALESCE((SELECT jsonb_object_agg(language, n) FROM (
        SELECT language, count(*) AS n FROM files f WHERE f.repository_id = r.id
        GROUP BY language) l), '{}'::jsonb) AS files_by_language
"""


async def list_repositories(conn: asyncpg.Connection, viewer: Viewer) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT {_REPOSITORY_COLUMNS} FROM repositories r "
            f"WHERE r.parent_id IS NULL AND {repository_readable('r', '$1', '$2')} "
            "ORDER BY r.slug",
            viewer.principal_id,
            viewer.admin,
        )
    )


async def get_repository(
    conn: asyncpg.Connection, slug: str, viewer: Viewer
) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await conn.fetchrow(
        f"SELECT {_REPOSITORY_COLUMNS} FROM repositories r "
        f"WHERE r.slug = $3 AND r.parent_id IS NULL AND {repository_readable('r', '$1', '$2')}",
        viewer.principal_id,
        viewer.admin,
        slug,
    )
    return row


async def delete_repository(conn: asyncpg.Connection, repository_id: int) -> None:
    """The repository (or one indexed ref's row) and everything indexed from it; a
    repository's refs go with it (ON DELETE CASCADE on parent_id)."""
    # Edges first, the refs' too: cascading them row by row from code_nodes is the slow path.
    async with conn.transaction():
        await conn.execute(
            "DELETE FROM code_edges WHERE repository_id IN "
            "(SELECT id FROM repositories WHERE id = $1 OR parent_id = $1)",
            repository_id,
        )
        await conn.execute("DELETE FROM repositories WHERE id = $1", repository_id)


async def ref_slugs(conn: asyncpg.Connection, repository_id: int) -> list[str]:
    """The slugs of a repository's indexed refs' rows, by ref name."""
    rows = await conn.fetch(
        "SELECT slug FROM repositories WHERE parent_id = $1 ORDER BY ref", repository_id
    )
    return [row["slug"] for row in rows]


async def indexed_refs(conn: asyncpg.Connection, repository_id: int) -> list[asyncpg.Record]:
    """A repository's indexed refs with their latest index job (its id and state), by
    name. The caller has checked that the viewer may read the repository."""
    return list(
        await conn.fetch(
            """
            SELECT r.ref, r.slug, r.branch, r.commit_sha, r.indexed_at, r.file_count,
                   r.last_checked_at, r.last_synced_at, j.id AS job_id, j.state AS job_state
            FROM repositories r
            LEFT JOIN LATERAL (
                SELECT id, state FROM index_jobs
                WHERE kind = 'repository' AND target = r.slug
                ORDER BY created_at DESC LIMIT 1
            ) j ON true
            WHERE r.parent_id = $1
            ORDER BY r.ref
            """,
            repository_id,
        )
    )


async def collection_id_by_name(conn: asyncpg.Connection, name: str) -> int | None:
    found = await conn.fetchval("SELECT id FROM collections WHERE name = $1", name)
    return int(found) if found is not None else None


async def delete_collection(conn: asyncpg.Connection, collection_id: int) -> None:
    """Its documents, chunks, texts, grants and router terms go with it (ON DELETE CASCADE)."""
    await conn.execute("DELETE FROM collections WHERE id = $1", collection_id)


async def collection_readable_by(conn: asyncpg.Connection, name: str, viewer: Viewer) -> bool:
    return bool(
        await conn.fetchval(
            f"SELECT 1 FROM collections c WHERE c.name = $3 AND "
            f"{collection_readable('c', '$1', '$2')}",
            viewer.principal_id,
            viewer.admin,
            name,
        )
    )


async def list_collections(conn: asyncpg.Connection, viewer: Viewer) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"""
            SELECT c.name, c.description, c.public, c.document_count, c.chunk_count,
                   c.indexed_at, c.last_checked_at, c.last_synced_at
            FROM collections c WHERE {collection_readable("c", "$1", "$2")} ORDER BY c.name
            """,
            viewer.principal_id,
            viewer.admin,
        )
    )

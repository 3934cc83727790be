"""SQL that indexing writes: repositories, files, nodes, edges, documents, router terms."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from cograph_text.paths import is_test_path
from retrieval import term_statistics
from retrieval.indexing import generations
from retrieval.indexing.pipeline import Vectors, WorkUnit
from retrieval.indexing.records import FilePayload, NodeRecord
from retrieval.indexing.refs import ref_slug
from retrieval.search.lexemes import lexical_text
from svckit.errors import FailedPrecondition

# Full-text inputs are capped: tsvector positions stop at 16383 anyway and a 1 MB limit
# applies; the head of a body carries most of its vocabulary.
_TSV_BODY_CHARS = 60_000

_CODE_TSV = (
    "setweight(to_tsvector('simple', $A), 'A') || setweight(to_tsvector('simple', $B), 'B') "
    "|| setweight(to_tsvector('simple', $C), 'C') || setweight(to_tsvector('simple', $D), 'D')"
)

_INSERT_NODE = f"""
INSERT INTO code_nodes (id, repository_id, path, language, qualified_name, name, kind,
    start_line, end_line, signature, body, docstring, parent_id, parent_qualified_name,
    content_hash, created_at, last_changed_at, tsv, embedding, summary, summary_tsv,
    summary_embedding, generation, is_test, bindings)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
    {_CODE_TSV.replace("$A", "$18").replace("$B", "$19").replace("$C", "$20").replace("$D", "$21")},
    $22, $23, CASE WHEN $23::text IS NULL THEN NULL ELSE to_tsvector('simple', $24) END, $25,
    $26, $27, $28::jsonb)
"""

_INSERT_EDGE = """
INSERT INTO code_edges (repository_id, src_node_id, dst_node_id, dst_name, kind, lines, receiver)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""

_INSERT_REPO_DOC = """
INSERT INTO repo_docs (repository_id, path, heading_path, start_line, end_line, body,
    content_hash, updated_at, tsv, embedding, generation)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
    setweight(to_tsvector('english', $9), 'A') || setweight(to_tsvector('english', $10), 'D'),
    $11, $12)
"""

_INSERT_COLLECTION_CHUNK = """
INSERT INTO md_collection_chunks (collection_id, path, heading_path, start_line, end_line,
    body, content_hash, updated_at, tsv, embedding, generation)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
    setweight(to_tsvector('english', $9), 'A') || setweight(to_tsvector('english', $10), 'D'),
    $11, $12)
"""


def _vector(unit: WorkUnit, index: int | None) -> Vectors | None:
    return None if index is None else unit.vectors[index]


def _bindings(node: NodeRecord, payload: FilePayload) -> str | None:
    """The file's module-level typed names as JSON, on its module node only."""
    if node.kind != "module" or not payload.bindings:
        return None
    return json.dumps(payload.bindings, sort_keys=True)


def _doc_rows(owner_id: int, unit: WorkUnit) -> list[tuple[Any, ...]]:
    """Rows of _INSERT_REPO_DOC or _INSERT_COLLECTION_CHUNK (the same columns) for a
    file's chunks; `owner_id` is the repository's or the collection's id."""
    payload = unit.payload
    return [
        (
            owner_id,
            doc.path,
            list(doc.heading_path),
            doc.start_line,
            doc.end_line,
            doc.body,
            payload.content_hash,
            doc.updated_at,
            " ".join(doc.heading_path),
            doc.body,
            _vector(unit, doc.embed_index),
        )
        for doc in payload.docs
    ]


# ---------------------------------------------------------------- repositories


async def upsert_repository(
    conn: asyncpg.Connection, slug: str, source: str, source_kind: str, public: bool
) -> tuple[int, bool]:
    """(id, whether this call created the row)."""
    row = await conn.fetchrow(
        """
        INSERT INTO repositories (slug, source, source_kind, public)
        VALUES ($1, $2, $3, $4)
        ON CONFLICT (slug) DO UPDATE SET source = EXCLUDED.source,
            source_kind = EXCLUDED.source_kind, public = repositories.public OR EXCLUDED.public
        RETURNING id, (xmax = 0) AS created
        """,
        slug,
        source,
        source_kind,
        public,
    )
    assert row is not None
    return row["id"], row["created"]


async def upsert_ref(
    conn: asyncpg.Connection, slug: str, ref: str, source: str, source_kind: str
) -> int:
    """The id of the row indexing `ref` of repository `slug` (indexing/refs.py), made on its
    first run: a child of the repository's row, as public as it is, never granted to
    anyone itself (access follows the repository). FailedPrecondition when the repository
    is gone (deleted while the ref's job waited)."""
    row = await conn.fetchrow(
        """
        INSERT INTO repositories (slug, source, source_kind, public, parent_id, ref)
        SELECT $1, $2, $3, p.public, p.id, $4 FROM repositories p
        WHERE p.slug = $5 AND p.parent_id IS NULL
        ON CONFLICT (slug) DO UPDATE SET source = EXCLUDED.source,
            source_kind = EXCLUDED.source_kind
        RETURNING id
        """,
        ref_slug(slug, ref),
        source,
        source_kind,
        ref,
        slug,
    )
    if row is None:
        raise FailedPrecondition(f"no repository {slug}: its ref {ref!r} cannot be indexed")
    return int(row["id"])


async def add_grants(
    conn: asyncpg.Connection,
    principals: Iterable[str],
    *,
    repository_id: int | None = None,
    collection_id: int | None = None,
    role: str = "read",
) -> None:
    """Grants `role` to each principal; an existing grant is only ever raised to write."""
    target = "repository_id" if repository_id is not None else "collection_id"
    target_id = repository_id if repository_id is not None else collection_id
    for principal in dict.fromkeys(p for p in principals if p):
        await conn.execute(
            f"INSERT INTO grants (principal_id, {target}, role) VALUES ($1, $2, $3) "
            f"ON CONFLICT ({target}, principal_id) WHERE {target} IS NOT NULL DO UPDATE "
            "SET role = CASE WHEN EXCLUDED.role = 'write' THEN 'write' ELSE grants.role END",
            principal,
            target_id,
            role,
        )


async def needs_linking(conn: asyncpg.Connection, repository_id: int) -> bool:
    return bool(
        await conn.fetchval("SELECT needs_linking FROM repositories WHERE id = $1", repository_id)
    )


async def mark_needs_linking(conn: asyncpg.Connection, repository_id: int) -> None:
    await conn.execute("UPDATE repositories SET needs_linking = true WHERE id = $1", repository_id)


async def file_hashes(conn: asyncpg.Connection, repository_id: int) -> dict[str, str]:
    """Each indexed file's content hash; '' for a file whose text is not stored (indexed
    before file_contents existed), so the next run prepares it again and stores it."""
    rows = await conn.fetch(
        """
        SELECT f.path, CASE WHEN c.path IS NULL THEN '' ELSE f.content_hash END AS content_hash
        FROM files f LEFT JOIN file_contents c
            ON c.repository_id = f.repository_id AND c.path = f.path
        WHERE f.repository_id = $1
        """,
        repository_id,
    )
    return {row["path"]: row["content_hash"] for row in rows}


def _content_rows(owner_id: int, payloads: Sequence[FilePayload]) -> list[tuple[Any, ...]]:
    """Staged text rows: (owner, path, text, line count). PostgreSQL text holds no
    NUL, so one (rare: binary files are skipped) is stored as U+FFFD."""
    rows = []
    for p in payloads:
        text = p.content.replace("\x00", "\ufffd")
        rows.append((owner_id, p.path, text, content_line_count(text)))
    return rows


def content_line_count(text: str) -> int:
    """Lines as read counts them: a final newline does not start another line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


async def _stage_contents(
    conn: asyncpg.Connection,
    kind: generations.Published,
    owner_id: int,
    payloads: Sequence[FilePayload],
    generation: int,
) -> None:
    """The run's texts, staged: read and grep answer from the published ones until
    generations publishes these."""
    await conn.executemany(
        f"""
        INSERT INTO {kind.staged} ({kind.key}, path, content, line_count, generation)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT ({kind.key}, path) DO UPDATE SET
            content = EXCLUDED.content, line_count = EXCLUDED.line_count,
            generation = EXCLUDED.generation
        """,
        [(*row, generation) for row in _content_rows(owner_id, payloads)],
    )


async def write_files(
    conn: asyncpg.Connection,
    repository_id: int,
    units: Sequence[WorkUnit],
    *,
    generation: int = 0,
    split_identifiers: bool = True,
) -> None:
    """Writes the rows of these files, one transaction, as `generation`: beside the rows
    searches read until the run is published (generations.publish), which deletes the
    files' older rows. `split_identifiers` is how the code tsvectors are built
    (lexemes.lexical_terms)."""

    def lexical(text: str, max_chars: int | None = None) -> str:
        return lexical_text(text, max_chars, split_identifiers)

    payloads: list[FilePayload] = [unit.payload for unit in units]
    paths = [p.path for p in payloads]
    node_total = sum(len(p.nodes) for p in payloads)
    async with conn.transaction():
        for table in ("code_nodes", "repo_docs"):  # a file written twice in one run
            await conn.execute(
                f"DELETE FROM {table} WHERE repository_id = $1 AND path = ANY($2::text[]) "
                "AND generation = $3",
                repository_id,
                paths,
                generation,
            )
        ids: list[int] = []
        if node_total:
            ids = [
                row[0]
                for row in await conn.fetch(
                    "SELECT nextval('code_nodes_id_seq') FROM generate_series(1, $1)", node_total
                )
            ]
        node_rows: list[tuple[Any, ...]] = []
        edge_rows: list[tuple[Any, ...]] = []
        doc_rows: list[tuple[Any, ...]] = []
        cursor = 0
        for unit, payload in zip(units, payloads, strict=True):
            local: dict[str, int] = {}
            for node in payload.nodes:
                local[node.qualified_name] = ids[cursor]
                cursor += 1
            for node in payload.nodes:
                node_rows.append(
                    (
                        local[node.qualified_name],
                        repository_id,
                        node.path,
                        node.language,
                        node.qualified_name,
                        node.name,
                        node.kind,
                        node.start_line,
                        node.end_line,
                        node.signature,
                        node.body,
                        node.docstring,
                        local.get(node.parent) if node.parent else None,
                        node.parent,
                        payload.content_hash,
                        node.created_at,
                        node.last_changed_at,
                        lexical(f"{node.qualified_name} {node.name}"),
                        lexical(node.signature),
                        lexical(node.docstring or ""),
                        lexical(node.body, _TSV_BODY_CHARS),
                        _vector(unit, node.embed_index),
                        node.summary,
                        lexical(node.summary or ""),
                        _vector(unit, node.summary_index),
                        generation,
                        # Test code weighs less in search (ranking's test-code weight).
                        is_test_path(node.path),
                        _bindings(node, payload),
                    )
                )
            for edge in payload.edges:
                src = local.get(edge.src)
                if src is None:
                    continue
                dst = local.get(edge.dst_name) if edge.kind == "contains" else None
                edge_rows.append(
                    (
                        repository_id,
                        src,
                        dst,
                        edge.dst_name,
                        edge.kind,
                        list(edge.lines) or None,
                        edge.receiver,
                    )
                )
            doc_rows.extend((*row, generation) for row in _doc_rows(repository_id, unit))
        if node_rows:
            await conn.executemany(_INSERT_NODE, node_rows)
        if edge_rows:
            await conn.executemany(_INSERT_EDGE, edge_rows)
        if doc_rows:
            await conn.executemany(_INSERT_REPO_DOC, doc_rows)
        await conn.executemany(
            """
            INSERT INTO files (repository_id, path, content_hash, language, store, size_bytes,
                               node_count, chunk_count, updated_at, indexed_at, generation)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now(), $10)
            ON CONFLICT (repository_id, path) DO UPDATE SET
                content_hash = EXCLUDED.content_hash, language = EXCLUDED.language,
                store = EXCLUDED.store, size_bytes = EXCLUDED.size_bytes,
                node_count = EXCLUDED.node_count, chunk_count = EXCLUDED.chunk_count,
                updated_at = EXCLUDED.updated_at, indexed_at = now(),
                generation = EXCLUDED.generation
            """,
            [
                (
                    repository_id,
                    p.path,
                    p.content_hash,
                    p.language,
                    p.store,
                    p.size,
                    len(p.nodes),
                    len(p.docs),
                    p.updated_at,
                    generation,
                )
                for p in payloads
            ],
        )
        await _stage_contents(conn, generations.REPOSITORIES, repository_id, payloads, generation)


async def delete_files(conn: asyncpg.Connection, repository_id: int, paths: list[str]) -> None:
    if not paths:
        return
    async with conn.transaction():
        for table in ("code_nodes", "repo_docs", "files"):
            await conn.execute(
                f"DELETE FROM {table} WHERE repository_id = $1 AND path = ANY($2::text[])",
                repository_id,
                paths,
            )


@dataclass(frozen=True)
class LinkGraph:
    nodes: list[asyncpg.Record]
    edges: list[asyncpg.Record]


async def load_link_graph(conn: asyncpg.Connection, repository_id: int) -> LinkGraph:
    """Everything edge resolution reads (no bodies: a Python node's first lines, where
    its decorators tell an overload stub), in a stable order."""
    nodes = await conn.fetch(
        """
        SELECT id, path, qualified_name, name, kind, language, start_line, end_line,
               signature, parent_qualified_name,
               CASE WHEN language = 'python' THEN left(body, 400) ELSE '' END AS head,
               bindings::text AS bindings
        FROM code_nodes WHERE repository_id = $1 AND kind <> 'chunk'
        ORDER BY path, id
        """,
        repository_id,
    )
    edges = await conn.fetch(
        """
        SELECT e.id, n.path, n.qualified_name AS src, e.dst_name, e.kind, e.dst_node_id,
               e.receiver
        FROM code_edges e JOIN code_nodes n ON n.id = e.src_node_id
        WHERE e.repository_id = $1
        ORDER BY n.path, e.id
        """,
        repository_id,
    )
    return LinkGraph(list(nodes), list(edges))


async def set_edge_targets(
    conn: asyncpg.Connection, edge_ids: list[int], dst_ids: list[int | None]
) -> None:
    if not edge_ids:
        return
    await conn.execute(
        """
        UPDATE code_edges e SET dst_node_id = u.dst
        FROM unnest($1::bigint[], $2::bigint[]) AS u(id, dst)
        WHERE e.id = u.id
        """,
        edge_ids,
        dst_ids,
    )


async def module_level_names(conn: asyncpg.Connection, repository_id: int) -> list[asyncpg.Record]:
    """Module nodes and the definitions directly inside them, shallow paths first."""
    return list(
        await conn.fetch(
            """
            SELECT n.qualified_name, n.path, n.kind = 'module' AS is_module
            FROM code_nodes n LEFT JOIN code_nodes p ON p.id = n.parent_id
            WHERE n.repository_id = $1 AND (n.kind = 'module' OR p.kind = 'module')
            ORDER BY n.kind <> 'module', length(n.path) - length(replace(n.path, '/', '')),
                     n.path, n.start_line
            """,
            repository_id,
        )
    )


async def file_paths(conn: asyncpg.Connection, repository_id: int) -> list[str]:
    rows = await conn.fetch(
        """
        SELECT path FROM files WHERE repository_id = $1
        ORDER BY length(path) - length(replace(path, '/', '')), path
        """,
        repository_id,
    )
    return [row["path"] for row in rows]


async def replace_terms(
    conn: asyncpg.Connection, table: str, key: str, owner_id: int, terms: set[tuple[str, str]]
) -> None:
    """Swaps the router corpus of one repository or collection (caller's transaction)."""
    assert (table, key) in (
        ("repository_terms", "repository_id"),
        ("collection_terms", "collection_id"),
    )
    ordered = sorted(terms)
    await conn.execute(f"DELETE FROM {table} WHERE {key} = $1", owner_id)
    await conn.execute(
        f"INSERT INTO {table} ({key}, source, term) "
        "SELECT $1, s, t FROM unnest($2::text[], $3::text[]) AS u(s, t) ON CONFLICT DO NOTHING",
        owner_id,
        [s for s, _ in ordered],
        [t for _, t in ordered],
    )


async def finish_repository(
    conn: asyncpg.Connection,
    repository_id: int,
    *,
    branch: str,
    commit: str,
    readme_excerpt: str,
    terms: set[tuple[str, str]],
    generation: int = 0,
) -> None:
    """Records the run and publishes `generation` (searches read rows up to it)."""
    async with conn.transaction():
        await replace_terms(conn, "repository_terms", "repository_id", repository_id, terms)
        published = await conn.fetchval(
            """
            UPDATE repositories SET branch = $2, commit_sha = $3, readme_excerpt = $4,
                indexed_at = now(), needs_linking = false, reindex_reason = '',
                published_generation = greatest(published_generation, $5),
                file_count = (SELECT count(*) FROM files WHERE repository_id = $1),
                node_count = (SELECT count(*) FROM code_nodes WHERE repository_id = $1),
                edge_count = (SELECT count(*) FROM code_edges WHERE repository_id = $1),
                doc_chunk_count = (SELECT count(*) FROM repo_docs WHERE repository_id = $1)
            WHERE id = $1
            RETURNING published_generation
            """,
            repository_id,
            branch,
            commit,
            readme_excerpt,
            generation,
        )
        if published is not None:  # None: the repository was deleted meanwhile
            await term_statistics.refresh(
                conn, term_statistics.REPOSITORY_FIELDS, repository_id, published
            )


# ---------------------------------------------------------------- collections


async def upsert_collection(
    conn: asyncpg.Connection, name: str, description: str, source: str, public: bool
) -> tuple[int, str, bool]:
    """(id, effective description, whether this call created it): an empty description
    keeps the stored one."""
    row = await conn.fetchrow(
        """
        INSERT INTO collections (name, description, source, public) VALUES ($1, $2, $3, $4)
        ON CONFLICT (name) DO UPDATE SET
            description = CASE WHEN EXCLUDED.description = '' THEN collections.description
                               ELSE EXCLUDED.description END,
            source = EXCLUDED.source, public = collections.public OR EXCLUDED.public
        RETURNING id, description, (xmax = 0) AS created
        """,
        name,
        description,
        source,
        public,
    )
    assert row is not None
    return row["id"], row["description"], row["created"]


async def document_hashes(conn: asyncpg.Connection, collection_id: int) -> dict[str, str]:
    """As file_hashes: '' for a document whose text is not stored."""
    rows = await conn.fetch(
        """
        SELECT d.path, CASE WHEN c.path IS NULL THEN '' ELSE d.content_hash END AS content_hash
        FROM collection_documents d LEFT JOIN collection_document_contents c
            ON c.collection_id = d.collection_id AND c.path = d.path
        WHERE d.collection_id = $1
        """,
        collection_id,
    )
    return {row["path"]: row["content_hash"] for row in rows}


async def write_documents(
    conn: asyncpg.Connection, collection_id: int, units: Sequence[WorkUnit], generation: int
) -> None:
    """Writes these documents' chunks as `generation`, beside the rows searches read until
    the run is published (generations.publish_collection_rows); their texts are staged."""
    payloads: list[FilePayload] = [unit.payload for unit in units]
    async with conn.transaction():
        await conn.execute(  # a document written twice in one run
            "DELETE FROM md_collection_chunks WHERE collection_id = $1 AND path = ANY($2) "
            "AND generation = $3",
            collection_id,
            [p.path for p in payloads],
            generation,
        )
        rows = [(*row, generation) for unit in units for row in _doc_rows(collection_id, unit)]
        if rows:
            await conn.executemany(_INSERT_COLLECTION_CHUNK, rows)
        await conn.executemany(
            """
            INSERT INTO collection_documents (collection_id, path, content_hash, chunk_count,
                                              updated_at, generation)
            VALUES ($1, $2, $3, $4, $5, $6)
            ON CONFLICT (collection_id, path) DO UPDATE SET
                content_hash = EXCLUDED.content_hash, chunk_count = EXCLUDED.chunk_count,
                updated_at = EXCLUDED.updated_at, generation = EXCLUDED.generation
            """,
            [
                (collection_id, p.path, p.content_hash, len(p.docs), p.updated_at, generation)
                for p in payloads
            ],
        )
        await _stage_contents(conn, generations.COLLECTIONS, collection_id, payloads, generation)


async def finish_collection(
    conn: asyncpg.Connection,
    collection_id: int,
    *,
    heading_tree: str,
    terms: set[tuple[str, str]],
    generation: int,
) -> None:
    """The collection's terms, tree and counts, and the switch to `generation` (run in the
    transaction that published its rows)."""
    async with conn.transaction():
        await replace_terms(conn, "collection_terms", "collection_id", collection_id, terms)
        await conn.execute(
            """
            UPDATE collections SET heading_tree = $2, indexed_at = now(), reindex_reason = '',
                published_generation = $3,
                document_count = (SELECT count(*) FROM collection_documents
                                  WHERE collection_id = $1),
                chunk_count = (SELECT count(*) FROM md_collection_chunks
                               WHERE collection_id = $1)
            WHERE id = $1
            """,
            collection_id,
            heading_tree,
            generation,
        )
        await term_statistics.refresh(
            conn, term_statistics.COLLECTION_FIELDS, collection_id, generation
        )

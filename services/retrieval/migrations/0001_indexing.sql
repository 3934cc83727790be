-- Retrieval's stores: repositories and collections with their access grants, the code store
-- (nodes + typed edges), repo_docs, md_collection_chunks, the per-file bookkeeping that makes
-- re-indexing incremental, the router's precomputed term tables, and indexing jobs.
--
-- Readers (search, router) filter on access inside their own SQL; the rule is:
--   readable(repository r) := admin OR r.public
--                             OR EXISTS (SELECT 1 FROM grants g
--                                        WHERE g.repository_id = r.id AND g.principal_id = $me)
-- and likewise for collections (see retrieval/acl.py for the fragments).

CREATE TABLE repositories (
    id              bigserial PRIMARY KEY,
    slug            text        NOT NULL UNIQUE,         -- host/owner/name
    branch          text        NOT NULL DEFAULT '',     -- '' for plain directories
    source          text        NOT NULL,                -- path or URL as given
    source_kind     text        NOT NULL CHECK (source_kind IN ('git', 'dir', 'url')),
    commit_sha      text        NOT NULL DEFAULT '',     -- '' for plain directories
    public          boolean     NOT NULL DEFAULT false,
    readme_excerpt  text        NOT NULL DEFAULT '',     -- first 2000 chars of the README
    indexed_at      timestamptz,                         -- NULL until a run has finished
    -- True while a run has written files but not yet re-linked edges and router terms;
    -- the next run links even when no file changed, so an interrupted run is completed.
    needs_linking   boolean     NOT NULL DEFAULT true,
    file_count      integer     NOT NULL DEFAULT 0,
    node_count      integer     NOT NULL DEFAULT 0,
    edge_count      integer     NOT NULL DEFAULT 0,
    doc_chunk_count integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE collections (
    id             bigserial PRIMARY KEY,
    name           text        NOT NULL UNIQUE,
    description    text        NOT NULL DEFAULT '',
    source         text        NOT NULL DEFAULT '',      -- directory, or '' for uploads
    heading_tree   text        NOT NULL DEFAULT '',      -- flattened, at most 64 KB
    public         boolean     NOT NULL DEFAULT false,
    indexed_at     timestamptz,
    document_count integer     NOT NULL DEFAULT 0,
    chunk_count    integer     NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Who may read what, beyond public sources and admins. Exactly one target per row.
CREATE TABLE grants (
    id            bigserial PRIMARY KEY,
    principal_id  text   NOT NULL,
    repository_id bigint REFERENCES repositories (id) ON DELETE CASCADE,
    collection_id bigint REFERENCES collections (id) ON DELETE CASCADE,
    CHECK ((repository_id IS NULL) <> (collection_id IS NULL))
);
CREATE UNIQUE INDEX grants_repository_principal ON grants (repository_id, principal_id)
    WHERE repository_id IS NOT NULL;
CREATE UNIQUE INDEX grants_collection_principal ON grants (collection_id, principal_id)
    WHERE collection_id IS NOT NULL;
CREATE INDEX grants_principal ON grants (principal_id);

-- One row per indexed file of a repository; the content hash makes re-runs incremental.
CREATE TABLE files (
    repository_id bigint      NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    path          text        NOT NULL,
    content_hash  text        NOT NULL,                  -- sha256 of the bytes
    language      text        NOT NULL,                  -- python, go, ..., markdown, text, yaml
    store         text        NOT NULL CHECK (store IN ('code', 'repo_docs')),
    size_bytes    integer     NOT NULL,
    node_count    integer     NOT NULL DEFAULT 0,
    chunk_count   integer     NOT NULL DEFAULT 0,
    updated_at    timestamptz,                           -- newest commit (or mtime) of the file
    indexed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (repository_id, path)
);

-- The code store: one row per symbol (module, class, function, ...) or plain-text chunk.
CREATE TABLE code_nodes (
    id                    bigserial PRIMARY KEY,
    repository_id         bigint      NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    path                  text        NOT NULL,
    language              text        NOT NULL,
    qualified_name        text        NOT NULL,          -- '.'-separated in every language
    name                  text        NOT NULL,
    -- module, class, struct, interface, trait, impl, enum, function, method; or chunk for
    -- a line range of a file no grammar handles (configs, scripts in other languages).
    kind                  text        NOT NULL,
    start_line            integer     NOT NULL,          -- 1-based, inclusive
    end_line              integer     NOT NULL,          -- 1-based, inclusive
    signature             text        NOT NULL DEFAULT '',
    body                  text        NOT NULL,
    docstring             text,
    parent_id             bigint REFERENCES code_nodes (id) ON DELETE CASCADE
                              DEFERRABLE INITIALLY DEFERRED,
    parent_qualified_name text,
    content_hash          text        NOT NULL,          -- of the file the node came from
    created_at            timestamptz,                   -- oldest commit touching its lines
    last_changed_at       timestamptz,                   -- newest commit touching its lines
    -- 'simple' config over identifier-split text (lexical.lexical_text): names weigh A,
    -- signature B, docstring C, body D.
    tsv                   tsvector    NOT NULL,
    embedding             vector(384),                   -- qualified name + signature + body
    summary               text,                          -- the ast_summary layer
    summary_tsv           tsvector,                      -- 'simple', identifier-split
    summary_embedding     vector(384)
);
CREATE INDEX code_nodes_repository_path ON code_nodes (repository_id, path);
CREATE INDEX code_nodes_repository_qname ON code_nodes (repository_id, qualified_name);
CREATE INDEX code_nodes_parent ON code_nodes (parent_id);
CREATE INDEX code_nodes_changed ON code_nodes (repository_id, (coalesce(last_changed_at, created_at)));
CREATE INDEX code_nodes_qname_trgm ON code_nodes USING gin (qualified_name gin_trgm_ops);
CREATE INDEX code_nodes_tsv ON code_nodes USING gin (tsv);
CREATE INDEX code_nodes_summary_tsv ON code_nodes USING gin (summary_tsv);
CREATE INDEX code_nodes_embedding ON code_nodes USING hnsw (embedding vector_cosine_ops);
CREATE INDEX code_nodes_summary_embedding ON code_nodes
    USING hnsw (summary_embedding vector_cosine_ops);

-- Typed edges; dst_node_id is NULL when the target is outside the repository or ambiguous
-- (dst_name keeps the name as written). Deleting a target nulls the pointer; the next
-- linking pass repairs it.
CREATE TABLE code_edges (
    id            bigserial PRIMARY KEY,
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    src_node_id   bigint NOT NULL REFERENCES code_nodes (id) ON DELETE CASCADE,
    dst_node_id   bigint REFERENCES code_nodes (id) ON DELETE SET NULL,
    dst_name      text   NOT NULL,
    kind          text   NOT NULL
        CHECK (kind IN ('calls', 'imports', 'inherits', 'implements', 'contains'))
);
CREATE INDEX code_edges_src ON code_edges (src_node_id, kind);
CREATE INDEX code_edges_dst ON code_edges (dst_node_id, kind) WHERE dst_node_id IS NOT NULL;
CREATE INDEX code_edges_repository ON code_edges (repository_id);

-- The repository's own prose: markdown chunked by heading, other text by line ranges.
CREATE TABLE repo_docs (
    id            bigserial PRIMARY KEY,
    repository_id bigint      NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    path          text        NOT NULL,
    heading_path  text[]      NOT NULL DEFAULT '{}',     -- ancestors first, own heading last
    start_line    integer     NOT NULL,
    end_line      integer     NOT NULL,
    body          text        NOT NULL,
    content_hash  text        NOT NULL,
    updated_at    timestamptz,                           -- newest commit touching the chunk
    tsv           tsvector    NOT NULL,                  -- 'english': headings A, body D
    embedding     vector(384)                            -- heading path + body
);
CREATE INDEX repo_docs_repository_path ON repo_docs (repository_id, path);
CREATE INDEX repo_docs_updated ON repo_docs (repository_id, updated_at);
CREATE INDEX repo_docs_tsv ON repo_docs USING gin (tsv);
CREATE INDEX repo_docs_embedding ON repo_docs USING hnsw (embedding vector_cosine_ops);

-- One row per document of a collection (incremental re-indexing, like files).
CREATE TABLE collection_documents (
    collection_id bigint      NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    path          text        NOT NULL,
    content_hash  text        NOT NULL,
    chunk_count   integer     NOT NULL DEFAULT 0,
    updated_at    timestamptz,
    PRIMARY KEY (collection_id, path)
);

CREATE TABLE md_collection_chunks (
    id            bigserial PRIMARY KEY,
    collection_id bigint      NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    path          text        NOT NULL,
    heading_path  text[]      NOT NULL DEFAULT '{}',
    start_line    integer     NOT NULL,
    end_line      integer     NOT NULL,
    body          text        NOT NULL,
    content_hash  text        NOT NULL,
    updated_at    timestamptz,
    tsv           tsvector    NOT NULL,                  -- 'english': headings A, body D
    embedding     vector(384)
);
CREATE INDEX md_collection_chunks_collection_path ON md_collection_chunks (collection_id, path);
CREATE INDEX md_collection_chunks_tsv ON md_collection_chunks USING gin (tsv);
CREATE INDEX md_collection_chunks_embedding ON md_collection_chunks
    USING hnsw (embedding vector_cosine_ops);

-- The router's corpus, precomputed at index time. One row per distinct lowercased entry:
-- source 'label' (the slug and its parts: host, owner, name), 'branch', 'readme' (words of
-- the first 2000 README chars), 'qualified_name' and 'path' (module-level qualified names
-- and file paths, at most 1500 together). Substring matching: term LIKE '%' || q || '%'
-- uses the trigram index.
CREATE TABLE repository_terms (
    repository_id bigint NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    source        text   NOT NULL,
    term          text   NOT NULL,
    PRIMARY KEY (repository_id, source, term)
);
CREATE INDEX repository_terms_trgm ON repository_terms USING gin (term gin_trgm_ops);
CREATE INDEX repository_terms_term ON repository_terms (term);

-- Same for collections: 'label' (name and its parts), 'description' (words), 'heading'
-- (each heading of the flattened tree, within 64 KB). Chunk bodies are matched through
-- md_collection_chunks.tsv.
CREATE TABLE collection_terms (
    collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    source        text   NOT NULL,
    term          text   NOT NULL,
    PRIMARY KEY (collection_id, source, term)
);
CREATE INDEX collection_terms_trgm ON collection_terms USING gin (term gin_trgm_ops);
CREATE INDEX collection_terms_term ON collection_terms (term);

-- Indexing jobs, so GetJob answers after a restart or from another replica.
CREATE TABLE index_jobs (
    id          text        PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('repository', 'collection')),
    target      text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    error       text        NOT NULL DEFAULT '',
    progress    jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
CREATE INDEX index_jobs_target ON index_jobs (kind, target, created_at DESC);

-- The code stores keyed by their repository (docs/scaling.md, deploy/citus/): a
-- distributed PostgreSQL (Citus) shards a table by one column, and needs that column in
-- every primary and unique key and on both sides of every foreign key between sharded
-- tables, so that each check stays inside one shard. `files` and `file_contents` already
-- lead with repository_id; code_nodes, code_edges and repo_docs were keyed by id alone.
-- Lookups by id alone keep an index of their own (not unique: ids still come from one
-- sequence each, so they stay unique in practice). Edges and parents never cross a
-- repository (linking resolves names within one), so the composite keys change nothing
-- that is stored. On a large index this rebuilds the three tables' key indexes once.
ALTER TABLE code_edges DROP CONSTRAINT code_edges_src_node_id_fkey;
ALTER TABLE code_edges DROP CONSTRAINT code_edges_dst_node_id_fkey;
ALTER TABLE code_nodes DROP CONSTRAINT code_nodes_parent_id_fkey;

ALTER TABLE code_nodes DROP CONSTRAINT code_nodes_pkey;
ALTER TABLE code_nodes ADD CONSTRAINT code_nodes_pkey PRIMARY KEY (repository_id, id);
CREATE INDEX code_nodes_id ON code_nodes (id);
ALTER TABLE code_nodes ADD CONSTRAINT code_nodes_parent_id_fkey
    FOREIGN KEY (repository_id, parent_id) REFERENCES code_nodes (repository_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE code_edges DROP CONSTRAINT code_edges_pkey;
ALTER TABLE code_edges ADD CONSTRAINT code_edges_pkey PRIMARY KEY (repository_id, id);
CREATE INDEX code_edges_id ON code_edges (id);
ALTER TABLE code_edges ADD CONSTRAINT code_edges_src_node_id_fkey
    FOREIGN KEY (repository_id, src_node_id) REFERENCES code_nodes (repository_id, id)
    ON DELETE CASCADE;
-- Only the target is cleared when it goes (the column list: PostgreSQL 15 and later);
-- the edge keeps its repository.
ALTER TABLE code_edges ADD CONSTRAINT code_edges_dst_node_id_fkey
    FOREIGN KEY (repository_id, dst_node_id) REFERENCES code_nodes (repository_id, id)
    ON DELETE SET NULL (dst_node_id);

ALTER TABLE repo_docs DROP CONSTRAINT repo_docs_pkey;
ALTER TABLE repo_docs ADD CONSTRAINT repo_docs_pkey PRIMARY KEY (repository_id, id);
CREATE INDEX repo_docs_id ON repo_docs (id);

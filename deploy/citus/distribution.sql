-- How Cograph's tables are laid out on a Citus cluster (deploy/citus/README.md): run once
-- on the coordinator, after `cograph migrate` and before the services start, as a role
-- that may create Citus tables. tests/integration/test_citus_schema.py reads this file and
-- checks the schema the migrations make against Citus's rules for it.
--
-- Three kinds of table:
--   reference    copied to every node; what distributed rows are joined with or checked
--                against (repositories and their access, the BM25 statistics every shard
--                scores with, so scores agree across shards);
--   distributed  sharded by repository_id, all in one co-location group, so a repository's
--                files, nodes, edges and documents live on one node and every key and
--                foreign key check stays inside one shard;
--   local        kept on the coordinator only (Citus managed local tables): small, or
--                written by triggers (the router's postings and the collections that feed
--                them; Citus does not run triggers on distributed or reference tables),
--                or read by one service alone (keys, notes, jobs).

-- ---- reference -------------------------------------------------------------------------
SELECT create_reference_table('repositories');
SELECT create_reference_table('collections');
SELECT create_reference_table('grants');
SELECT create_reference_table('lexical_fields');
SELECT create_reference_table('lexical_df');

-- ---- distributed by repository ---------------------------------------------------------
SELECT create_distributed_table('files', 'repository_id');
SELECT create_distributed_table('file_contents', 'repository_id', colocate_with => 'files');
SELECT create_distributed_table('file_contents_staged', 'repository_id', colocate_with => 'files');
SELECT create_distributed_table('code_nodes', 'repository_id', colocate_with => 'files');
SELECT create_distributed_table('code_edges', 'repository_id', colocate_with => 'files');
SELECT create_distributed_table('repo_docs', 'repository_id', colocate_with => 'files');

-- ---- local (on the coordinator; listed for the schema check) ---------------------------
-- local: cograph_migrations
-- local: index_jobs, retrieval_embedding_space, retrieval_principal_writes
-- local: repository_terms, collection_terms
-- local: collection_documents, collection_document_contents,
--        collection_document_contents_staged, md_collection_chunks
-- local: router_tokens, router_repository_postings, router_collection_postings,
--        router_collection_lexemes, router_versions
-- local: users, posts, votes, comments, searches, search_results, moderation_log,
--        post_anchors, commons_embedding_space, commons_principal_writes
-- local: api_keys, key_principals

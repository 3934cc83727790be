"""Indexing: a repository or collection from its source to committed rows.

indexer (one run), jobs (background runs and their progress), pipeline (prepare, embed
and write overlapped), prepare (one file into rows), records (the rows of one file),
sources, source_policy and git (where files come from, what a caller may name, how git
runs), blame, markdown, summaries, linking (edge targets), router_corpus (the router's
terms), freshness (indexed commit against the branch head), index_store (the SQL that
writes) and parsing/ (tree-sitter code nodes and edges).
"""

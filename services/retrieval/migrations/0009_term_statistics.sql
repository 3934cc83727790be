-- Term statistics for BM25 in the lexical stream (retrieval/term_statistics.py): per
-- repository or collection and per field (a tsvector column of one table), how many rows
-- the published index holds and their total length (lexemes per row), and for each lexeme
-- in how many rows it appears. Written in the transaction that publishes an index, so
-- searches always read the statistics of the rows they rank. A lexeme found in a single
-- row is not stored: a lexeme without a row counts as appearing once.
CREATE TABLE lexical_fields (
    id            bigserial PRIMARY KEY,
    repository_id bigint REFERENCES repositories (id) ON DELETE CASCADE,
    collection_id bigint REFERENCES collections (id) ON DELETE CASCADE,
    field         text   NOT NULL,
    documents     bigint NOT NULL CHECK (documents >= 0),
    total_length  bigint NOT NULL CHECK (total_length >= 0),
    CHECK ((repository_id IS NULL) <> (collection_id IS NULL)),
    UNIQUE (repository_id, field),
    UNIQUE (collection_id, field)
);

CREATE TABLE lexical_df (
    field_id bigint  NOT NULL REFERENCES lexical_fields (id) ON DELETE CASCADE,
    lexeme   text    NOT NULL,
    df       integer NOT NULL CHECK (df > 1),
    PRIMARY KEY (field_id, lexeme)
);

-- Statistics of what is already published (later publications keep them current).
INSERT INTO lexical_fields (repository_id, field, documents, total_length)
SELECT r.id, f.field, count(t.v), coalesce(sum(length(t.v)), 0)
FROM repositories r
CROSS JOIN (VALUES ('code'), ('code_summary'), ('repo_docs')) AS f (field)
LEFT JOIN LATERAL (
    SELECT n.tsv AS v FROM code_nodes n
    WHERE f.field = 'code' AND n.repository_id = r.id AND n.generation <= r.published_generation
    UNION ALL
    SELECT n.summary_tsv FROM code_nodes n
    WHERE f.field = 'code_summary' AND n.repository_id = r.id
      AND n.generation <= r.published_generation AND n.summary_tsv IS NOT NULL
    UNION ALL
    SELECT d.tsv FROM repo_docs d
    WHERE f.field = 'repo_docs' AND d.repository_id = r.id
      AND d.generation <= r.published_generation
) t ON true
GROUP BY r.id, f.field;

INSERT INTO lexical_fields (collection_id, field, documents, total_length)
SELECT c.id, 'md_chunks', count(t.id), coalesce(sum(length(t.tsv)), 0)
FROM collections c
LEFT JOIN md_collection_chunks t
    ON t.collection_id = c.id AND t.generation <= c.published_generation
GROUP BY c.id;

INSERT INTO lexical_df (field_id, lexeme, df)
SELECT f.id, s.word, s.ndoc
FROM lexical_fields f
JOIN repositories r ON r.id = f.repository_id
CROSS JOIN LATERAL ts_stat(format(
    'SELECT %I FROM %I WHERE repository_id = %s AND generation <= %s AND %I IS NOT NULL',
    CASE f.field WHEN 'code_summary' THEN 'summary_tsv' ELSE 'tsv' END,
    CASE f.field WHEN 'repo_docs' THEN 'repo_docs' ELSE 'code_nodes' END,
    r.id, r.published_generation,
    CASE f.field WHEN 'code_summary' THEN 'summary_tsv' ELSE 'tsv' END
)) s
WHERE s.ndoc > 1;

INSERT INTO lexical_df (field_id, lexeme, df)
SELECT f.id, s.word, s.ndoc
FROM lexical_fields f
JOIN collections c ON c.id = f.collection_id
CROSS JOIN LATERAL ts_stat(format(
    'SELECT tsv FROM md_collection_chunks WHERE collection_id = %s AND generation <= %s',
    c.id, c.published_generation
)) s
WHERE s.ndoc > 1;

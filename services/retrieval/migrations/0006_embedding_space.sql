-- Which embedding model this database's vectors come from (cograph_api.embedding_space).
-- One row: `model` and `dimension` of the vectors stored in code_nodes.embedding,
-- code_nodes.summary_embedding, repo_docs.embedding and md_collection_chunks.embedding.
-- NULL on a database without vectors: the first writer records its model (and sizes the
-- columns to its dimension). Search and indexing compare it with the embedder's model and
-- refuse to mix two models' vectors. `reembed_*` is set while `cograph reembed` moves the
-- vectors to another model: the columns then hold only that model's vectors or NULL.
CREATE TABLE retrieval_embedding_space (
    singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    model              text,
    dimension          integer     CHECK (dimension > 0),
    recorded_at        timestamptz,
    reembed_model      text,
    reembed_dimension  integer     CHECK (reembed_dimension > 0),
    reembed_started_at timestamptz,
    CHECK ((model IS NULL) = (dimension IS NULL)),
    CHECK ((reembed_model IS NULL) = (reembed_dimension IS NULL))
);

-- Vectors written before this record existed came from the packaged model.
INSERT INTO retrieval_embedding_space (model, dimension, recorded_at)
SELECT 'all-MiniLM-L6-v2', 384, now()
WHERE EXISTS (SELECT 1 FROM code_nodes WHERE embedding IS NOT NULL OR summary_embedding IS NOT NULL)
   OR EXISTS (SELECT 1 FROM repo_docs WHERE embedding IS NOT NULL)
   OR EXISTS (SELECT 1 FROM md_collection_chunks WHERE embedding IS NOT NULL);
INSERT INTO retrieval_embedding_space (model, dimension)
SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM retrieval_embedding_space);

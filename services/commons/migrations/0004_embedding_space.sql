-- Which embedding model the notes' vectors (posts.embedding) come from
-- (cograph_api.embedding_space). One row; NULL on a database without vectors, recorded by
-- the first writer. `reembed_*` is set while `cograph reembed` moves the vectors to another
-- model.
CREATE TABLE commons_embedding_space (
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
INSERT INTO commons_embedding_space (model, dimension, recorded_at)
SELECT 'all-MiniLM-L6-v2', 384, now()
WHERE EXISTS (SELECT 1 FROM posts WHERE embedding IS NOT NULL);
INSERT INTO commons_embedding_space (model, dimension)
SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM commons_embedding_space);

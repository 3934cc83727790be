"""Which embedding model a database's vectors come from, and the rule that two models'
vectors are never mixed.

Retrieval and the commons each keep a one-row record (`<service>_embedding_space`: model,
dimension, and the model a re-embed is moving to). `EmbeddingSpace` is the service side:

- a monitor asks the embedder for its model (`Info`) at first contact and then every
  `check_s`, compares it with the record, logs one ERROR line saying what to run when they
  differ, and reports the verdict (gRPC health name `HEALTH_NAME`, read by the gateway's
  `/readyz`);
- `checked(client)` wraps an embedder client: a call while the spaces differ, or whose
  answer came from another model than the record's, raises `SpaceMismatch` (reason
  `embedding_model_mismatch`) instead of returning vectors that would be compared with,
  or written beside, another model's;
- `hold_for_write(conn, identity)` runs inside every transaction that writes vectors: it
  share-locks the record row, so a re-embed (which updates that row first) waits for
  writers in flight and later writers see it; on a database without vectors it records the
  writer's model, sizing the vector columns to its dimension.

`reembed` (used by `python -m retrieval.reembed` and `python -m commons.reembed`, which
`cograph reembed` runs) moves a database to the embedder's model: it records the target,
changes every vector column to `vector(N) USING NULL` (dropping the HNSW indexes), fills
the NULL vectors from the stored text in batches, re-creates the indexes and records the
new model last. An interrupted run resumes where it stopped: rows whose vector is NULL are
the work left.

Table, column and index names come from the services' code, never from input; the model
name an embedder reports reaches SQL only as a parameter.
"""

from cograph_api.embedding_space.monitor import (
    CheckedEmbedder,
    EmbeddingSpace,
    IdentifyingEmbedder,
    health_reporter,
)
from cograph_api.embedding_space.record import (
    HEALTH_NAME,
    MISMATCH_REASON,
    REEMBED_LOCK_KEYS,
    SpaceMismatch,
    SpaceRecord,
    SpaceSpec,
    VectorColumn,
    claim,
    column_dimensions,
    create_indexes,
    hold_for_write,
    read_record,
    record_model,
    resize_columns,
    verdict,
)
from cograph_api.embedding_space.reembed import (
    Progress,
    ReembedBusy,
    ReembedReport,
    Work,
    reembed,
    reembed_main,
)

__all__ = [
    "HEALTH_NAME",
    "MISMATCH_REASON",
    "REEMBED_LOCK_KEYS",
    "CheckedEmbedder",
    "EmbeddingSpace",
    "IdentifyingEmbedder",
    "Progress",
    "ReembedBusy",
    "ReembedReport",
    "SpaceMismatch",
    "SpaceRecord",
    "SpaceSpec",
    "VectorColumn",
    "Work",
    "claim",
    "column_dimensions",
    "create_indexes",
    "health_reporter",
    "hold_for_write",
    "read_record",
    "record_model",
    "reembed",
    "reembed_main",
    "resize_columns",
    "verdict",
]

-- Read your own writes on replicas (svckit.replicas): after a principal posts, votes,
-- comments, names itself or anchors a note, the primary's WAL position is kept here, and
-- that principal's searches and reads go to a replica only once it has replayed past it.
-- The principal '*' stands for every reader (a note or comment hidden or deleted). Read and
-- written on the primary only; one row per principal.
CREATE TABLE commons_principal_writes (
    principal  text        PRIMARY KEY,
    lsn        pg_lsn      NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);

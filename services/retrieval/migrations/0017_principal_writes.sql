-- Read your own writes on replicas (svckit.replicas): after a write a principal will read
-- back (the publication of its index job, a grant or revocation naming it), the primary's
-- WAL position is kept here, and that principal's reads go to a replica only once it has
-- replayed past it. The principal '*' stands for every reader (a repository made private
-- or deleted). Read and written on the primary only; one row per principal.
CREATE TABLE retrieval_principal_writes (
    principal  text        PRIMARY KEY,
    lsn        pg_lsn      NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);

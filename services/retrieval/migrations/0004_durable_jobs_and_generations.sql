-- Durable index jobs: `index_jobs` is the queue. A job stores everything needed to run it
-- (`request`, who asked for it as `requester`), a worker claims it with
-- FOR UPDATE SKIP LOCKED and holds a lease it renews while the job runs; a job whose lease
-- ran out (its worker died) is claimed again, at most `attempts` times in all.
ALTER TABLE index_jobs
    ADD COLUMN request          jsonb       NOT NULL DEFAULT '{}',
    ADD COLUMN requester        jsonb       NOT NULL DEFAULT '{}',  -- {principal, admin}
    ADD COLUMN attempts         integer     NOT NULL DEFAULT 0,
    ADD COLUMN lease_owner      text,
    ADD COLUMN lease_expires_at timestamptz;

-- Jobs accepted before the queue existed carry no request: nothing can run them again.
UPDATE index_jobs SET state = 'failed', error = 'interrupted (the service restarted)',
    finished_at = now(), updated_at = now()
WHERE state IN ('queued', 'running');

-- One active job per target: a second request joins it (ON CONFLICT on this index).
CREATE UNIQUE INDEX index_jobs_active_target ON index_jobs (kind, target)
    WHERE state IN ('queued', 'running');
-- What workers scan when they look for work.
CREATE INDEX index_jobs_pending ON index_jobs (created_at)
    WHERE state IN ('queued', 'running');

-- Atomic publication. Every row of a repository's index carries the generation (index
-- run) that wrote it; searches read only rows whose generation is at most the
-- repository's `published_generation`. A run writes generation published + 1 beside the
-- previous rows and publishes in one transaction at the end (older rows of the files it
-- replaced or removed are deleted, the generation is switched), so a crash mid-run leaves
-- the previous version searchable and, for a first index, nothing. Rows written before
-- generations existed are generation 0, published.
ALTER TABLE repositories ADD COLUMN published_generation bigint NOT NULL DEFAULT 0;
ALTER TABLE code_nodes ADD COLUMN generation bigint NOT NULL DEFAULT 0;
ALTER TABLE repo_docs ADD COLUMN generation bigint NOT NULL DEFAULT 0;
-- The generation that last wrote the file's row: after a crash, files written by the
-- abandoned run are indexed again.
ALTER TABLE files ADD COLUMN generation bigint NOT NULL DEFAULT 0;

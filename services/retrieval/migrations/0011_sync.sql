-- Sync (retrieval/indexing/sync.py): every indexed repository and directory collection is
-- compared with its source every RETRIEVAL_SYNC_INTERVAL_S and re-indexed when it moved.
--
--   sync_due_at      when the next check is due; NULL: one interval after indexed_at. A
--                    replica claims a due target by moving it forward (FOR UPDATE SKIP
--                    LOCKED), so replicas never check the same target at once.
--   sync_failures    checks in a row that failed (source unreadable, or the re-index the
--                    previous check queued failed): the next check waits twice as long for
--                    each, up to RETRIEVAL_SYNC_BACKOFF_MAX_S.
--   sync_fingerprint a plain directory's listing (paths, sizes, mtimes) as its last check
--                    saw it, hashed; '' when unknown. Git sources compare heads instead.
--   sync_job_id      the index job the last check queued; its outcome is read at the next.
--   last_checked_at  when a check last ran (failed or not).
--   last_synced_at   when an index run the sync queued last finished successfully.
ALTER TABLE repositories
    ADD COLUMN sync_due_at      timestamptz,
    ADD COLUMN sync_failures    integer NOT NULL DEFAULT 0,
    ADD COLUMN sync_fingerprint text    NOT NULL DEFAULT '',
    ADD COLUMN sync_job_id      text,
    ADD COLUMN last_checked_at  timestamptz,
    ADD COLUMN last_synced_at   timestamptz;

ALTER TABLE collections
    ADD COLUMN sync_due_at      timestamptz,
    ADD COLUMN sync_failures    integer NOT NULL DEFAULT 0,
    ADD COLUMN sync_fingerprint text    NOT NULL DEFAULT '',
    ADD COLUMN sync_job_id      text,
    ADD COLUMN last_checked_at  timestamptz,
    ADD COLUMN last_synced_at   timestamptz;

-- Grants carry a role: `read` (search, graph, read) or `write` (also re-index and change
-- the source). Grants made before roles existed let their principal read, so they stay
-- `read`. Visibility, grants and deletion remain admin-only and need no role.
ALTER TABLE grants
    ADD COLUMN role text NOT NULL DEFAULT 'read' CHECK (role IN ('read', 'write'));

-- Who asked for an index job: they may follow it even before its target exists (a new
-- repository is only written when its source has been fetched). Others see a job only
-- when they may read its target.
ALTER TABLE index_jobs
    ADD COLUMN requested_by text[] NOT NULL DEFAULT '{}';

-- Notes shown beside code (code_notes.py) look anchors up by where their code is now: the
-- qualified name and path they point at, or where the code went while the status is
-- 'moved' (moved_* are set then and only then). Orphaned anchors are never shown beside
-- code, so they are left out of both indexes.
CREATE INDEX post_anchors_current_name
    ON post_anchors (repo, (coalesce(moved_qualified_name, qualified_name)))
    WHERE status <> 'orphaned';
CREATE INDEX post_anchors_current_path
    ON post_anchors (repo, (coalesce(moved_path, path)))
    WHERE status <> 'orphaned';

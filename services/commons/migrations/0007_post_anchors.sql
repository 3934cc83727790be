-- Notes anchored to code. An anchor is a note's data: the commons keeps it, retrieval only
-- resolves it (as the poster, who must read the code) and re-checks it (as the commons).
-- The node columns hold what the anchor was resolved or last confirmed to point at; the
-- checked_* columns the published index it was last compared with (a staleness check runs
-- when a repository publishes a generation newer than checked_generation). moved_* say
-- where the code went while the status is 'moved'. repository_id is retrieval's id: a
-- repository deleted and indexed again under the same slug has another, and the anchors of
-- the old one are orphaned. Deleting the note deletes its anchors; nothing else does.
CREATE TABLE post_anchors (
    id                   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    post_id              uuid        NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
    repository_id        bigint      NOT NULL,
    repo                 text        NOT NULL,
    -- The request's form: a symbol, or a path with a line range (symbol '').
    symbol               text        NOT NULL DEFAULT '',
    requested_path       text        NOT NULL DEFAULT '',
    requested_start_line integer     NOT NULL DEFAULT 0,
    requested_end_line   integer     NOT NULL DEFAULT 0,
    qualified_name       text        NOT NULL,
    path                 text        NOT NULL,
    start_line           integer     NOT NULL,
    end_line             integer     NOT NULL,
    kind                 text        NOT NULL,
    signature_hash       text        NOT NULL,
    body_hash            text        NOT NULL,
    commit_sha           text        NOT NULL,
    generation           bigint      NOT NULL,
    status               text        NOT NULL DEFAULT 'fresh' CHECK (status IN
                             ('fresh', 'body_changed', 'signature_changed', 'moved', 'orphaned')),
    checked_commit       text        NOT NULL,
    checked_generation   bigint      NOT NULL,
    checked_at           timestamptz NOT NULL DEFAULT now(),
    -- When the status last changed: the review listing shows the longest-changed first.
    status_changed_at    timestamptz NOT NULL DEFAULT now(),
    moved_path           text,
    moved_qualified_name text,
    moved_start_line     integer,
    moved_end_line       integer,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX post_anchors_post ON post_anchors (post_id, created_at);
-- The staleness check's scan (per repository, what is older than its published generation)
-- and the review listing (per repository and status).
CREATE INDEX post_anchors_repository ON post_anchors (repository_id, checked_generation);
CREATE INDEX post_anchors_review ON post_anchors (repository_id, status, status_changed_at);

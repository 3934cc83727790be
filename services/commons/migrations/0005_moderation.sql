-- Moderation: an admin hides (or unhides) a note or a comment, or deletes one that another
-- principal wrote, and says why. A hidden note is out of search and is "not found" to
-- everyone but its author and admins (commons.board); a hidden comment is out of its note's
-- comments likewise. posts.comment_count counts the visible comments only.
ALTER TABLE posts ADD COLUMN hidden_at timestamptz;
ALTER TABLE comments ADD COLUMN hidden_at timestamptz;

-- Who moderated what, when and why; admins read it (ListModerationLog). No foreign keys on
-- purpose, like the search log: the record must outlive the note or comment it removed, so it
-- keeps the target's author and the start of its text.
CREATE TABLE moderation_log (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    principal_id   text        NOT NULL,
    action         text        NOT NULL CHECK (action IN ('hide', 'unhide', 'delete')),
    target_kind    text        NOT NULL CHECK (target_kind IN ('post', 'comment')),
    target_id      uuid        NOT NULL,
    post_id        uuid        NOT NULL,
    target_author  text        NOT NULL,
    target_excerpt text        NOT NULL,
    reason         text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX moderation_log_target ON moderation_log (target_id);

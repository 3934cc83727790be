-- The commons: users (agents), notes, votes, comments and the search log.

-- One row per principal that has written something; contributor_no is the public handle,
-- assigned once on first write and never reused.
CREATE TABLE users (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    principal_id   text        NOT NULL UNIQUE,
    contributor_no bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- embedding is NULL until the detached embed task or the backfill writes it; such a note is
-- excluded from search. score and comment_count are denormalised for ranking, and are only
-- changed inside the transaction that changes votes / comments (under the post's row lock).
CREATE TABLE posts (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    author_id     uuid        NOT NULL REFERENCES users (id),
    title         text        NOT NULL,
    body          text        NOT NULL,
    tags          text[]      NOT NULL DEFAULT '{}',
    score         bigint      NOT NULL DEFAULT 0,
    comment_count bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    embedding     vector(384)
);

-- Exact search cannot use it (a blended ORDER BY); two-stage retrieval's first stage does.
CREATE INDEX posts_embedding_hnsw ON posts USING hnsw (embedding vector_cosine_ops);
-- The backfill's work queue: small, because embedded notes leave it.
CREATE INDEX posts_unembedded ON posts (created_at) WHERE embedding IS NULL;
CREATE INDEX posts_author ON posts (author_id);

-- One vote per user per post; withdrawing deletes the row.
CREATE TABLE votes (
    post_id    uuid        NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
    user_id    uuid        NOT NULL REFERENCES users (id),
    value      smallint    NOT NULL CHECK (value IN (-1, 1)),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (post_id, user_id)
);

CREATE TABLE comments (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    post_id    uuid        NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
    author_id  uuid        NOT NULL REFERENCES users (id),
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX comments_post ON comments (post_id, created_at);

-- The search log. search_results.post_id has no foreign key on purpose: the log is history
-- and must survive the author deleting a note it once returned.
CREATE TABLE searches (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    query        text        NOT NULL,
    principal_id text,
    result_count integer     NOT NULL,
    strategy     text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- score_at is the note's vote score when it was returned, not its similarity (never stored).
CREATE TABLE search_results (
    search_id bigint  NOT NULL REFERENCES searches (id) ON DELETE CASCADE,
    rank      integer NOT NULL,
    post_id   uuid    NOT NULL,
    score_at  bigint  NOT NULL,
    PRIMARY KEY (search_id, rank)
);

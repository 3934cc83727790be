-- API keys. Only a SHA-256 of each key is stored: keys are 32 random bytes, so a fast hash
-- is enough (no dictionary to attack) and lets a lookup be one index probe per request.
CREATE TABLE api_keys (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL,
    principal_id text        NOT NULL,
    admin        boolean     NOT NULL DEFAULT false,
    key_hash     bytea       NOT NULL UNIQUE,
    -- The first characters of the key, shown in listings so a person can tell keys apart.
    key_prefix   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX api_keys_admin_active ON api_keys (admin) WHERE revoked_at IS NULL;

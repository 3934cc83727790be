-- One row per principal that keys act for, with its admin flag: every key of a principal
-- has that flag (the foreign key below), so a non-admin key can never act for an admin's
-- principal, which would let it author and delete as that admin in the commons. A reserved
-- principal (cograph_api.limits.RESERVED_PRINCIPALS; tests/unit/test_keys_principals.py
-- checks this list against it) is an admin's only: the operator paths store the `admin`
-- principal's keys.

-- Keys that already break the rule (a non-admin key sharing an admin's principal, or holding
-- a reserved one) acted as someone they are not: they are revoked and moved to a principal
-- of their own, so the table below can hold.
UPDATE api_keys k
SET principal_id = k.principal_id || '.collided-' || left(k.id::text, 8),
    revoked_at = coalesce(k.revoked_at, now())
WHERE NOT k.admin
  AND (lower(k.principal_id) IN
         ('admin', 'administrator', 'root', 'system', 'operator', 'anonymous', 'public', 'cograph')
       OR EXISTS (SELECT 1 FROM api_keys a WHERE a.admin AND a.principal_id = k.principal_id));

CREATE TABLE key_principals (
    principal_id text        PRIMARY KEY,
    admin        boolean     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (principal_id, admin),
    CONSTRAINT key_principals_reserved CHECK (admin OR lower(principal_id) NOT IN
        ('admin', 'administrator', 'root', 'system', 'operator', 'anonymous', 'public', 'cograph'))
);

INSERT INTO key_principals (principal_id, admin, created_at)
SELECT principal_id, bool_or(admin), min(created_at) FROM api_keys GROUP BY principal_id;

-- A key inserted without its principal row (the previous release's gateway, the operator's
-- bootstrap) gets one with the key's flag; the foreign key then refuses a key whose flag
-- differs from its principal's. The gateway's own key store inserts the row itself, without
-- ON CONFLICT, so that creating a key for a new principal cannot silently join another's.
CREATE FUNCTION api_keys_principal_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO key_principals (principal_id, admin) VALUES (NEW.principal_id, NEW.admin)
    ON CONFLICT (principal_id) DO NOTHING;
    RETURN NEW;
END
$$;

CREATE TRIGGER api_keys_principal_row BEFORE INSERT OR UPDATE OF principal_id, admin ON api_keys
FOR EACH ROW EXECUTE FUNCTION api_keys_principal_row();

ALTER TABLE api_keys ADD CONSTRAINT api_keys_principal_admin
    FOREIGN KEY (principal_id, admin) REFERENCES key_principals (principal_id, admin);

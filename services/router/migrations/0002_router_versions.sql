-- A version per source, raised in the transaction of every change that can alter a route's
-- answer, so the router can keep what it computed (which sources match a term, which sources
-- a principal may read) and know, with one small read, whether it is still exact.
--
-- Why: at 10,000 repositories a common term matches most of them, and re-deriving N and df
-- from the postings on every route dominated the latency (router/cache.py).
--
-- The router compares the sum of a pool's versions with the sum it cached under. Versions
-- only ever grow and rows are never deleted (no foreign key: a deleted source keeps its row),
-- so any committed change raises the sum, and equal sums mean nothing relevant committed in
-- between. Everything a route reads is covered: the sources themselves (existence, name,
-- visibility), grants (either target), corpus entries (which feed the postings) and chunk
-- bodies (which feed the lexemes). A TRUNCATE raises row 0 of the pool. Nothing to backfill:
-- a source without a row is at version 0, and its first change inserts version 1.
--
-- Each writer raises only the rows of the sources it touches, in id order, so writers of
-- different sources never wait on each other. SECURITY DEFINER like the postings triggers:
-- retrieval's role needs no rights here, the router's only SELECT.
CREATE TABLE router_versions (
    pool      text   NOT NULL CHECK (pool IN ('repository', 'collection')),
    source_id bigint NOT NULL,  -- repositories.id or collections.id; 0 for TRUNCATE
    version   bigint NOT NULL,
    PRIMARY KEY (pool, source_id)
);

-- TG_ARGV[0]: the pool; TG_ARGV[1]: the column of the changed table naming the source.
-- Optionally TG_ARGV[2], the row's key, and TG_ARGV[3], the columns a route reads: then an
-- UPDATE raises only the sources of rows where one of those changed, so bookkeeping writes
-- (a sync claim setting sync_due_at, a publish setting commit_sha, an embedding) do not
-- make every route re-read.
CREATE FUNCTION router_versions_bump() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    changed text;
    watched text;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO router_versions AS v (pool, source_id, version) VALUES (TG_ARGV[0], 0, 1)
        ON CONFLICT (pool, source_id) DO UPDATE SET version = v.version + 1;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND TG_NARGS > 2 THEN
        -- Rows whose (key, source, read columns) differ before and after: an unchanged row
        -- is in both and drops out; a changed one raises its old and its new source.
        watched := format('%I AS row_key, %I AS id, %s', TG_ARGV[2], TG_ARGV[1], TG_ARGV[3]);
        changed := format(
            '(SELECT id FROM (SELECT %1$s FROM old_rows EXCEPT SELECT %1$s FROM new_rows) a)
             UNION ALL
             (SELECT id FROM (SELECT %1$s FROM new_rows EXCEPT SELECT %1$s FROM old_rows) b)',
            watched);
    ELSE
        changed := CASE TG_OP
            WHEN 'INSERT' THEN format('SELECT %I AS id FROM new_rows', TG_ARGV[1])
            WHEN 'DELETE' THEN format('SELECT %I AS id FROM old_rows', TG_ARGV[1])
            ELSE format('SELECT %1$I AS id FROM old_rows UNION SELECT %1$I FROM new_rows', TG_ARGV[1])
        END;
    END IF;
    EXECUTE format(
        'INSERT INTO router_versions AS v (pool, source_id, version)
         SELECT $1, c.id, 1 FROM (SELECT DISTINCT id FROM (%s) s WHERE id IS NOT NULL) c
         ORDER BY c.id
         ON CONFLICT (pool, source_id) DO UPDATE SET version = v.version + 1', changed)
    USING TG_ARGV[0];
    RETURN NULL;
END
$$;

-- Transition tables allow one event per trigger, hence four triggers per (table, pool).
-- key and watched: see router_versions_bump; NULL for tables whose every column is read.
CREATE PROCEDURE router_versions_watch(tbl text, pool text, col text, key text, watched text)
LANGUAGE plpgsql AS $$
DECLARE
    args text := format('%L, %L', pool, col)
        || CASE WHEN key IS NULL THEN '' ELSE format(', %L, %L', key, watched) END;
    prefix text := 'router_versions_' || tbl || '_' || pool;
BEGIN
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION router_versions_bump(%s)', prefix || '_insert', tbl, args);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION router_versions_bump(%s)', prefix || '_delete', tbl, args);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION router_versions_bump(%s)', prefix || '_update', tbl, args);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %I
        FOR EACH STATEMENT EXECUTE FUNCTION router_versions_bump(%s)', prefix || '_truncate', tbl, args);
END
$$;

-- What routes read of each table: a source's id, name and visibility; every column of grants
-- and of the corpus entries; a chunk's collection and its tsvector (the lexemes).
CALL router_versions_watch('repositories', 'repository', 'id', 'id', 'slug, public');
CALL router_versions_watch('repository_terms', 'repository', 'repository_id', NULL, NULL);
CALL router_versions_watch('grants', 'repository', 'repository_id', NULL, NULL);
CALL router_versions_watch('collections', 'collection', 'id', 'id', 'name, public');
CALL router_versions_watch('collection_terms', 'collection', 'collection_id', NULL, NULL);
CALL router_versions_watch('md_collection_chunks', 'collection', 'collection_id', 'id', 'tsv');
CALL router_versions_watch('grants', 'collection', 'collection_id', NULL, NULL);
DROP PROCEDURE router_versions_watch(text, text, text, text, text);

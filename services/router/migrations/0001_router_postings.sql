-- The router's own derived index over retrieval's precomputed corpus, so a route query is a
-- handful of small index lookups instead of a trigram scan over every corpus row.
--
-- Why: a substring match of a query term against repository_terms returns every entry that
-- contains it (thousands of qualified names and paths contain "config" or "client"), and
-- fetching those scattered heap rows dominated the route latency (20-80 ms at 1,000
-- repositories). Here each entry is split into its alphanumeric runs ("tokens"):
-- billing.retry.backoff -> billing, retry, backoff. A query term made only of [a-z0-9] is a
-- substring of an entry exactly when it is a substring of one of the entry's tokens, so the
-- trigram search runs over the distinct tokens (a small table) and the postings are read by
-- index-only scans. Terms with separators or other characters, and short terms, still match
-- repository_terms / collection_terms directly (router/store.py decides per term).
--
-- Chunk bodies: each collection's distinct 'english' lexemes with the number of chunks that
-- carry them, so "does any chunk of this collection contain the term" is one index lookup
-- instead of a full-text scan over every matching chunk.
--
-- Freshness: statement-level triggers on retrieval's tables keep all of this in step inside
-- the indexer's own transaction, so a re-indexed or deleted source is reflected the moment it
-- commits. They are SECURITY DEFINER so retrieval's role needs no rights on these tables; the
-- router's role only needs SELECT. Requires retrieval's 0001 migration (cograph up applies
-- retrieval's migrations before the router's).

CREATE TABLE router_tokens (
    id    bigserial PRIMARY KEY,
    token text      NOT NULL UNIQUE  -- never deleted: a token without postings matches nothing
);
CREATE INDEX router_tokens_trgm ON router_tokens USING gin (token gin_trgm_ops);

CREATE TABLE router_repository_postings (
    token_id      bigint NOT NULL,
    repository_id bigint NOT NULL,
    source        text   NOT NULL,  -- repository_terms.source
    PRIMARY KEY (token_id, repository_id, source)
);
CREATE INDEX router_repository_postings_owner ON router_repository_postings (repository_id, source);

CREATE TABLE router_collection_postings (
    token_id      bigint NOT NULL,
    collection_id bigint NOT NULL,
    source        text   NOT NULL,  -- collection_terms.source
    PRIMARY KEY (token_id, collection_id, source)
);
CREATE INDEX router_collection_postings_owner ON router_collection_postings (collection_id, source);

CREATE TABLE router_collection_lexemes (
    lexeme        text    NOT NULL,
    collection_id bigint  NOT NULL,
    chunks        integer NOT NULL,  -- chunks of the collection whose tsv has the lexeme
    PRIMARY KEY (lexeme, collection_id)
);
CREATE INDEX router_collection_lexemes_collection ON router_collection_lexemes (collection_id);

-- Tokens of a corpus entry: its maximal [a-z0-9] runs (entries are lowercased).
CREATE FUNCTION router_entry_tokens(entry text) RETURNS SETOF text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT t FROM regexp_split_to_table(entry, '[^a-z0-9]+') AS t WHERE t <> ''
$$;

CREATE FUNCTION router_repository_terms_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM router_repository_postings;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        -- Rebuild the postings of each (repository, source) that lost entries from what is
        -- left: a token may still be carried by another entry of the same source.
        DELETE FROM router_repository_postings p
        USING (SELECT DISTINCT repository_id, source FROM old_rows) o
        WHERE p.repository_id = o.repository_id AND p.source = o.source;
        INSERT INTO router_repository_postings (token_id, repository_id, source)
        SELECT DISTINCT t.id, rt.repository_id, rt.source
        FROM (SELECT DISTINCT repository_id, source FROM old_rows) o
        JOIN repository_terms rt ON rt.repository_id = o.repository_id AND rt.source = o.source
        CROSS JOIN LATERAL router_entry_tokens(rt.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token
        ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- Sorted, so concurrent indexers take the unique-index locks in the same order.
        INSERT INTO router_tokens (token)
        SELECT DISTINCT s.token FROM new_rows n CROSS JOIN LATERAL router_entry_tokens(n.term) AS s(token)
        ORDER BY 1
        ON CONFLICT DO NOTHING;
        INSERT INTO router_repository_postings (token_id, repository_id, source)
        SELECT DISTINCT t.id, n.repository_id, n.source
        FROM new_rows n
        CROSS JOIN LATERAL router_entry_tokens(n.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION router_collection_terms_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM router_collection_postings;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        DELETE FROM router_collection_postings p
        USING (SELECT DISTINCT collection_id, source FROM old_rows) o
        WHERE p.collection_id = o.collection_id AND p.source = o.source;
        INSERT INTO router_collection_postings (token_id, collection_id, source)
        SELECT DISTINCT t.id, ct.collection_id, ct.source
        FROM (SELECT DISTINCT collection_id, source FROM old_rows) o
        JOIN collection_terms ct ON ct.collection_id = o.collection_id AND ct.source = o.source
        CROSS JOIN LATERAL router_entry_tokens(ct.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token
        ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO router_tokens (token)
        SELECT DISTINCT s.token FROM new_rows n CROSS JOIN LATERAL router_entry_tokens(n.term) AS s(token)
        ORDER BY 1
        ON CONFLICT DO NOTHING;
        INSERT INTO router_collection_postings (token_id, collection_id, source)
        SELECT DISTINCT t.id, n.collection_id, n.source
        FROM new_rows n
        CROSS JOIN LATERAL router_entry_tokens(n.term) AS s(token)
        JOIN router_tokens t ON t.token = s.token
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;

-- Chunk lexemes are reference-counted rather than rebuilt: retrieval deletes and inserts
-- chunks document by document, and rebuilding a whole collection per statement would make
-- re-indexing a large collection quadratic.
CREATE FUNCTION router_collection_lexemes_add(delta integer, collection_ids bigint[], tsvs tsvector[])
RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    INSERT INTO router_collection_lexemes AS x (lexeme, collection_id, chunks)
    SELECT l.lexeme, c.collection_id, delta * count(*)
    FROM unnest(collection_ids, tsvs) AS c(collection_id, tsv)
    CROSS JOIN LATERAL unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
    GROUP BY 1, 2
    ORDER BY 1, 2  -- the same lock order in every concurrent indexer
    ON CONFLICT (lexeme, collection_id) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
    DELETE FROM router_collection_lexemes
    WHERE chunks <= 0 AND collection_id = ANY (collection_ids);
$$;

CREATE FUNCTION router_collection_chunks_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM router_collection_lexemes;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM router_collection_lexemes_add(
            1,
            ARRAY(SELECT n.collection_id FROM new_rows n ORDER BY n.id),
            ARRAY(SELECT n.tsv FROM new_rows n ORDER BY n.id));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM router_collection_lexemes_add(
            -1,
            ARRAY(SELECT o.collection_id FROM old_rows o ORDER BY o.id),
            ARRAY(SELECT o.tsv FROM old_rows o ORDER BY o.id));
    ELSE
        -- Only rows whose text or collection changed: setting an embedding changes nothing.
        PERFORM router_collection_lexemes_add(
            -1,
            ARRAY(SELECT o.collection_id FROM old_rows o JOIN new_rows n ON n.id = o.id
                  WHERE n.tsv <> o.tsv OR n.collection_id <> o.collection_id ORDER BY o.id),
            ARRAY(SELECT o.tsv FROM old_rows o JOIN new_rows n ON n.id = o.id
                  WHERE n.tsv <> o.tsv OR n.collection_id <> o.collection_id ORDER BY o.id));
        PERFORM router_collection_lexemes_add(
            1,
            ARRAY(SELECT n.collection_id FROM new_rows n JOIN old_rows o ON o.id = n.id
                  WHERE n.tsv <> o.tsv OR n.collection_id <> o.collection_id ORDER BY n.id),
            ARRAY(SELECT n.tsv FROM new_rows n JOIN old_rows o ON o.id = n.id
                  WHERE n.tsv <> o.tsv OR n.collection_id <> o.collection_id ORDER BY n.id));
    END IF;
    RETURN NULL;
END
$$;

-- Transition tables allow one event per trigger, hence three triggers per table.
CREATE TRIGGER router_repository_terms_insert AFTER INSERT ON repository_terms
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_repository_terms_changed();
CREATE TRIGGER router_repository_terms_delete AFTER DELETE ON repository_terms
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_repository_terms_changed();
CREATE TRIGGER router_repository_terms_update AFTER UPDATE ON repository_terms
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_repository_terms_changed();
CREATE TRIGGER router_repository_terms_truncate AFTER TRUNCATE ON repository_terms
    FOR EACH STATEMENT EXECUTE FUNCTION router_repository_terms_changed();

CREATE TRIGGER router_collection_terms_insert AFTER INSERT ON collection_terms
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_terms_changed();
CREATE TRIGGER router_collection_terms_delete AFTER DELETE ON collection_terms
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_terms_changed();
CREATE TRIGGER router_collection_terms_update AFTER UPDATE ON collection_terms
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_terms_changed();
CREATE TRIGGER router_collection_terms_truncate AFTER TRUNCATE ON collection_terms
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_terms_changed();

CREATE TRIGGER router_collection_chunks_insert AFTER INSERT ON md_collection_chunks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_chunks_changed();
CREATE TRIGGER router_collection_chunks_delete AFTER DELETE ON md_collection_chunks
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_chunks_changed();
CREATE TRIGGER router_collection_chunks_update AFTER UPDATE ON md_collection_chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_chunks_changed();
CREATE TRIGGER router_collection_chunks_truncate AFTER TRUNCATE ON md_collection_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION router_collection_chunks_changed();

-- Backfill from whatever retrieval has already indexed.
INSERT INTO router_tokens (token)
SELECT DISTINCT s.token
FROM (SELECT term FROM repository_terms UNION SELECT term FROM collection_terms) e
CROSS JOIN LATERAL router_entry_tokens(e.term) AS s(token)
ON CONFLICT DO NOTHING;
INSERT INTO router_repository_postings (token_id, repository_id, source)
SELECT DISTINCT t.id, rt.repository_id, rt.source
FROM repository_terms rt
CROSS JOIN LATERAL router_entry_tokens(rt.term) AS s(token)
JOIN router_tokens t ON t.token = s.token;
INSERT INTO router_collection_postings (token_id, collection_id, source)
SELECT DISTINCT t.id, ct.collection_id, ct.source
FROM collection_terms ct
CROSS JOIN LATERAL router_entry_tokens(ct.term) AS s(token)
JOIN router_tokens t ON t.token = s.token;
INSERT INTO router_collection_lexemes (lexeme, collection_id, chunks)
SELECT l.lexeme, c.collection_id, count(*)
FROM md_collection_chunks c CROSS JOIN LATERAL unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
GROUP BY 1, 2;

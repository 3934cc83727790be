-- Quoted phrases are literal filters over a note's title, body and tags. A trigram index over
-- that haystack lets a selective phrase find its few notes without reading every note (and
-- lets search count cheaply whether a phrase is selective; see board.NotesBoard.search).
-- Declared IMMUTABLE so it can be indexed: it only concatenates text (array_to_string is
-- STABLE in general because of element output functions; a text[] has none that vary).
CREATE FUNCTION commons_haystack(title text, body text, tags text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN title || ' ' || body || ' ' || array_to_string(tags, ' ');

CREATE INDEX posts_haystack_trgm ON posts USING gin (commons_haystack(title, body, tags) gin_trgm_ops);

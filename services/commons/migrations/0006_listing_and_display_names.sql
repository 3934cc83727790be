-- The note listing (ListPosts) and display names.
--
-- A contributor may show a name beside their number. Unique ignoring case, so that one
-- contributor cannot take the name another is known by; NULL (not set) for as many as like.
-- Its length and characters are the service's rules (commons.profiles, with the limit in
-- cograph_api.limits), not repeated here.
ALTER TABLE users ADD COLUMN display_name text;
CREATE UNIQUE INDEX users_display_name_lower ON users (lower(display_name))
    WHERE display_name IS NOT NULL;

-- The listing's two orders, each a keyset over (order, created_at, id) so that a page
-- reads only its own rows, and the tag filter (tags @> ARRAY[tag]).
CREATE INDEX posts_newest ON posts (created_at DESC, id DESC);
CREATE INDEX posts_top ON posts (score DESC, created_at DESC, id DESC);
CREATE INDEX posts_tags ON posts USING gin (tags);

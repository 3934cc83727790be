-- Named refs: a repository may index branches and tags besides its default branch. Each
-- indexed ref is a row of its own, a child of the repository's row (`parent_id`), so that
-- it has its own files, generations, published snapshot, index jobs and sync state, and is
-- deleted with its repository (ON DELETE CASCADE). A child's slug is `<parent slug>@<ref>`
-- ('@' is never part of a repository's slug); its `branch` is the ref's branch name, or
-- `refs/tags/<name>` for a tag. Access follows the parent: grants are looked up on
-- coalesce(parent_id, id) (cograph_api.access_rules) and `public` is kept equal to the
-- parent's. Searches without a ref see rows without a parent only.
ALTER TABLE repositories
    ADD COLUMN parent_id bigint REFERENCES repositories (id) ON DELETE CASCADE,
    ADD COLUMN ref       text NOT NULL DEFAULT '',   -- the ref's name; '' for a repository
    ADD CONSTRAINT repositories_ref_has_parent CHECK ((parent_id IS NULL) = (ref = ''));

CREATE UNIQUE INDEX repositories_parent_ref ON repositories (parent_id, ref)
    WHERE parent_id IS NOT NULL;

-- Authors may no longer vote on their own notes (commons.board: own_post_vote). Votes cast
-- before that rule are removed and the scores they touched recomputed, so every score counts
-- only other principals' votes. Two statements, not one with a data-modifying CTE: the
-- statements of one query share a snapshot, so a recount there would still see the deleted
-- votes.
UPDATE posts p
SET score = (
    SELECT coalesce(sum(v.value), 0) FROM votes v
    WHERE v.post_id = p.id AND v.user_id <> p.author_id
)
WHERE EXISTS (SELECT 1 FROM votes v WHERE v.post_id = p.id AND v.user_id = p.author_id);

DELETE FROM votes v
USING posts p
WHERE v.post_id = p.id AND v.user_id = p.author_id;

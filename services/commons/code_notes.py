"""Notes shown beside code: the notes anchored to each piece of code a caller is about to
show (NotesForCode), in one statement.

Retrieval asks, as the caller, once per search, read or references page, for the code it
returns: only code of repositories the caller may read (retrieval's answers hold nothing
else), so no note is shown beside code its reader cannot see. The note's own visibility is
applied here, as GetPost applies it: a hidden note exists only for its author and admins.

An anchor matches a target of the same repository when, where its code is now (moved_*
while the status is 'moved', else the node it was resolved or confirmed to), it has the
target's qualified name, or its lines overlap the target's in the same file. Orphaned
anchors are left out: their code is gone. The notes of one target are ranked by the
commons' blend without its semantic part (ranking.py): fresh and moved anchors (the code's
body unchanged) before changed ones, then w_votes * ln(1 + max(votes, 0)), then the newer
note. A note anchored twice to one target is given once, at its best anchor's status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from cograph_api.anchors import CodeTarget, check_code_target, check_code_targets
from commons.ranking import RankingWeights
from commons.store import visible
from svckit.requestctx import current_principal


@dataclass(frozen=True)
class CodeNote:
    id: str
    title: str
    score: int
    status: str


# Where an anchor's code is now: the same expressions as migration 0008's indexes, so each
# arm of the lookup is an index scan per target.
_NAME_NOW = "coalesce(a.moved_qualified_name, a.qualified_name)"
_PATH_NOW = "coalesce(a.moved_path, a.path)"
_START_NOW = "coalesce(a.moved_start_line, a.start_line)"
_END_NOW = "coalesce(a.moved_end_line, a.end_line)"

# $1..$5 the targets' columns, $6 notes per target, $7 the votes weight, $8 viewer, $9 admin.
NOTES_FOR_CODE_SQL = f"""
SELECT t.i, n.post_id, n.title, n.score, n.status
FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[])
     WITH ORDINALITY AS t(repo, path, qualified_name, start_line, end_line, i)
CROSS JOIN LATERAL (
    SELECT m.post_id, p.title, p.score, p.created_at,
           min(m.rank) AS rank, (array_agg(m.status ORDER BY m.rank, m.status))[1] AS status,
           $7::float8 * ln(1 + greatest(p.score, 0)) AS blend
    FROM (
        SELECT a.post_id, a.status,
               CASE WHEN a.status IN ('fresh', 'moved') THEN 0 ELSE 1 END AS rank
        FROM post_anchors a
        WHERE t.qualified_name <> '' AND a.repo = t.repo
          AND {_NAME_NOW} = t.qualified_name AND a.status <> 'orphaned'
        UNION ALL
        SELECT a.post_id, a.status,
               CASE WHEN a.status IN ('fresh', 'moved') THEN 0 ELSE 1 END AS rank
        FROM post_anchors a
        WHERE a.repo = t.repo AND {_PATH_NOW} = t.path AND a.status <> 'orphaned'
          AND {_START_NOW} <= t.end_line AND {_END_NOW} >= t.start_line
    ) m
    JOIN posts p ON p.id = m.post_id
    JOIN users u ON u.id = p.author_id
    WHERE {visible("p.hidden_at", "u.principal_id", "$8", "$9")}
    GROUP BY m.post_id, p.title, p.score, p.created_at
    ORDER BY rank, blend DESC, p.created_at DESC, m.post_id
    LIMIT $6
) n
ORDER BY t.i, n.rank, n.blend DESC, n.created_at DESC, n.post_id
"""


def checked_targets(raw: Sequence[CodeTarget], per_target: int) -> tuple[list[CodeTarget], int]:
    """The request's targets, each checked (naming its position), and the notes per
    target to give."""
    per = check_code_targets(len(raw), per_target)
    return [check_code_target(i, t) for i, t in enumerate(raw)], per


class CodeNotes:
    """The notes beside code, for the calling principal."""

    def __init__(self, pool: asyncpg.Pool, weights: RankingWeights) -> None:
        self._pool = pool
        self._weights = weights

    async def for_code(self, raw: Sequence[CodeTarget], per_target: int) -> list[list[CodeNote]]:
        """For each target, in order, the notes anchored to it, best first."""
        targets, per = checked_targets(raw, per_target)
        found: list[list[CodeNote]] = [[] for _ in targets]
        if not targets:
            return found
        principal = current_principal()
        rows = await self._pool.fetch(
            NOTES_FOR_CODE_SQL,
            [t.repo for t in targets],
            [t.path for t in targets],
            [t.qualified_name for t in targets],
            [t.start_line for t in targets],
            [t.end_line for t in targets],
            per,
            self._weights.votes,
            principal.id if principal is not None else None,
            principal.admin if principal is not None else False,
        )
        for row in rows:
            found[int(row["i"]) - 1].append(
                CodeNote(str(row["post_id"]), row["title"], int(row["score"]), row["status"])
            )
        return found

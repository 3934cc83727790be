"""Grep's context lines: the lines just before and after each match, from the indexed text.

Grep's own statement finds the matching lines; the lines around them come from a second
statement in the same snapshot (grep runs both in one repeatable-read transaction), so
they are the lines of the same indexed commit. That statement splits each file with a
match once and keeps only the wanted line numbers, so its answer is at most the context
lines asked for, however large the files. Lines past a file's edges do not exist: none is
made up at the start, and a final newline starts no new line (`file_contents.line_count`,
the count read gives).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cograph_api import limits

# $1, $2: the files (repository id, path), numbered from 1 in that order; $3, $4: the wanted
# (file number, line) pairs.
CONTEXT_SQL = f"""
SELECT w.file::int AS file, l.n::int AS line, left(l.text, {limits.GREP_LINE_MAX_CHARS}) AS text
FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS w(repository_id, path, file)
JOIN file_contents c ON c.repository_id = w.repository_id AND c.path = w.path
CROSS JOIN LATERAL regexp_split_to_table(c.content, E'\\n') WITH ORDINALITY AS l(text, n)
WHERE l.n <= c.line_count
  AND (w.file, l.n) IN (SELECT * FROM unnest($3::bigint[], $4::bigint[]))
"""


@dataclass(frozen=True)
class Located:
    """Where a match is: its file (repository id and path) and line."""

    repository_id: int
    path: str
    line: int


@dataclass(frozen=True)
class ContextQuery:
    """CONTEXT_SQL's parameters for a list of matches."""

    files: dict[tuple[int, str], int]  # (repository id, path) -> its number, from 1
    wanted: list[tuple[int, int]]  # (file number, line), sorted

    def args(self) -> tuple[list[int], list[str], list[int], list[int]]:
        return (
            [repository_id for repository_id, _ in self.files],
            [path for _, path in self.files],
            [file for file, _ in self.wanted],
            [line for _, line in self.wanted],
        )

    def file_of(self, match: Located) -> int:
        return self.files[match.repository_id, match.path]


def context_query(matches: Sequence[Located], context: int) -> ContextQuery:
    """The files the matches are in, and the lines within `context` of each match, each
    once (a match's own line left out unless it is another match's context). Lines below
    1 are never asked for; lines past the end are asked for and simply not found."""
    files: dict[tuple[int, str], int] = {}
    wanted: set[tuple[int, int]] = set()
    for match in matches:
        number = files.setdefault((match.repository_id, match.path), len(files) + 1)
        for line in range(max(1, match.line - context), match.line + context + 1):
            if line != match.line:
                wanted.add((number, line))
    return ContextQuery(files, sorted(wanted))


def surrounding(
    lines: Mapping[tuple[int, int], str], file: int, line: int, context: int
) -> tuple[list[str], list[str]]:
    """The lines found before and after `line` of `file`, in file order: up to `context`
    each, fewer at the file's edges."""
    before = [lines[file, n] for n in range(line - context, line) if (file, n) in lines]
    after = [lines[file, n] for n in range(line + 1, line + context + 1) if (file, n) in lines]
    return before, after

"""Reading what was indexed: a file's lines, the list of files, grep over their text.

Everything answers from the text stored at index time (`file_contents`,
`collection_document_contents`), so a read matches the indexed commit the search results
cite, never the working tree of today. Access is the search rule inside each statement: a
repository or collection the viewer may not read answers exactly like one that does not
exist (NOT_FOUND), and a grep over every repository only reads the readable ones.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from cograph_api import limits
from cograph_api.access_rules import Viewer, collection_readable, repository_readable
from cograph_api.cursors import PATH_FIELD, CursorCodec
from retrieval.search.grep_context import (
    CONTEXT_SQL,
    ContextQuery,
    Located,
    context_query,
    surrounding,
)
from retrieval.search.regex_cost import REGEX_STATES_MAX, regex_cost
from svckit.errors import DeadlineExceeded, InvalidArgument, NotFound

# Grep gives up after this long (the statement's own timeout, under the pool's deadline).
GREP_TIMEOUT_MS = 5000
# The client stops waiting this much later (and asks the server to cancel): the server's
# timeout, a clear error, wins on a healthy server; the client's holds on one that does not
# answer a cancel in time.
GREP_CLIENT_MARGIN_S = 1.0

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# ---------------------------------------------------------------- validation


def check_path(path: str, what: str = "path", *, prefix: bool = False) -> str:
    """A relative '/'-separated path as the indexer stores it, or INVALID_ARGUMENT:
    no leading '/', no '.' or '..' segment, no empty segment, no control characters
    (NUL included), at most PATH_MAX_CHARS. A prefix may be empty and may end with '/'."""
    if len(path) > limits.PATH_MAX_CHARS:
        raise InvalidArgument(f"{what} is at most {limits.PATH_MAX_CHARS} characters")
    if _CONTROL.search(path):
        raise InvalidArgument(f"{what} must not contain control characters")
    if not path:
        if prefix:
            return path
        raise InvalidArgument(f"{what} is required")
    if path.startswith("/") or "\\" in path:
        raise InvalidArgument(f"{what} must be relative to the repository root, with '/'")
    segments = path.split("/")
    if prefix and segments[-1] == "":
        segments = segments[:-1]
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidArgument(f"{what} must not contain empty, '.' or '..' segments")
    return path


def check_limit(value: int | None, low: int, high: int, default: int, what: str) -> int:
    if value is None:
        return default
    if not low <= value <= high:
        raise InvalidArgument(f"{what} must be between {low} and {high}")
    return value


# ---------------------------------------------------------------- read


@dataclass(frozen=True)
class LineSlice:
    start_line: int
    end_line: int
    total_lines: int
    content: str
    next_start_line: int | None


def split_lines(content: str) -> list[str]:
    """The file's lines, each keeping its newline; a final newline starts no new line.
    Only '\n' ends a line, as for the indexer's line numbers (a '\r' stays in its line)."""
    if not content:
        return []
    parts = content.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def slice_lines(
    content: str,
    start_line: int | None,
    end_line: int | None,
    *,
    max_lines: int = limits.READ_MAX_LINES,
    max_chars: int = limits.READ_MAX_CHARS,
) -> LineSlice:
    """Lines start_line..end_line (1-based, inclusive) within the size caps, cut at a line
    boundary (inside the first line only when that line alone is over max_chars); the
    answer says where to continue when the range was cut."""
    lines = split_lines(content)
    total = len(lines)
    start = 1 if start_line is None else start_line
    if start < 1:
        raise InvalidArgument("start_line must be at least 1")
    if end_line is not None and end_line < start:
        raise InvalidArgument("end_line must not be before start_line")
    if start > max(total, 1):
        raise InvalidArgument(f"start_line {start} is past the end of the file ({total} lines)")
    last = total if end_line is None else min(end_line, total)
    taken: list[str] = []
    used = 0
    line = start
    while line <= last and len(taken) < max_lines:
        text = lines[line - 1]
        if used + len(text) > max_chars:
            if not taken:  # one line over the cap: return its head, continue after it
                taken.append(text[:max_chars])
                line += 1
            break
        taken.append(text)
        used += len(text)
        line += 1
    end = start + len(taken) - 1
    return LineSlice(start, end, total, "".join(taken), line if line <= last else None)


_READ_REPOSITORY_SQL = f"""
SELECT r.slug, r.commit_sha, f.language, c.content
FROM repositories r
JOIN files f ON f.repository_id = r.id AND f.path = $4
JOIN file_contents c ON c.repository_id = f.repository_id AND c.path = f.path
WHERE r.slug = $3 AND {repository_readable("r", "$1", "$2")}
"""

_READ_COLLECTION_SQL = f"""
SELECT c.name, d.content
FROM collections c
JOIN collection_document_contents d ON d.collection_id = c.id AND d.path = $4
WHERE c.name = $3 AND {collection_readable("c", "$1", "$2")}
"""


@dataclass(frozen=True)
class ReadResult:
    repo: str
    collection: str
    path: str
    commit: str
    language: str
    lines: LineSlice


async def require_repository(conn: asyncpg.Connection, slug: str, viewer: Viewer) -> None:
    readable = await conn.fetchval(
        f"SELECT 1 FROM repositories r WHERE r.slug = $3 AND "
        f"{repository_readable('r', '$1', '$2')}",
        viewer.principal_id,
        viewer.admin,
        slug,
    )
    if not readable:  # unknown and unreadable look the same
        raise NotFound(f"no repository {slug}")


async def require_collection(conn: asyncpg.Connection, name: str, viewer: Viewer) -> None:
    readable = await conn.fetchval(
        f"SELECT 1 FROM collections c WHERE c.name = $3 AND {collection_readable('c', '$1', '$2')}",
        viewer.principal_id,
        viewer.admin,
        name,
    )
    if not readable:
        raise NotFound(f"no collection {name}")


async def read_file(
    conn: asyncpg.Connection,
    viewer: Viewer,
    *,
    repo: str,
    collection: str,
    path: str,
    start_line: int | None,
    end_line: int | None,
) -> ReadResult:
    if bool(repo) == bool(collection):
        raise InvalidArgument("give exactly one of repo and collection")
    path = check_path(path)
    if repo:
        await require_repository(conn, repo, viewer)
        row = await conn.fetchrow(
            _READ_REPOSITORY_SQL, viewer.principal_id, viewer.admin, repo, path
        )
        if row is None:
            raise NotFound(f"no indexed file {path} in {repo}")
        lines = slice_lines(row["content"], start_line, end_line)
        return ReadResult(repo, "", path, row["commit_sha"], row["language"], lines)
    await require_collection(conn, collection, viewer)
    row = await conn.fetchrow(
        _READ_COLLECTION_SQL, viewer.principal_id, viewer.admin, collection, path
    )
    if row is None:
        raise NotFound(f"no indexed document {path} in {collection}")
    lines = slice_lines(row["content"], start_line, end_line)
    return ReadResult("", collection, path, "", "markdown", lines)


# ---------------------------------------------------------------- files


@dataclass(frozen=True)
class FileEntry:
    path: str
    language: str
    size: int


@dataclass(frozen=True)
class FilePage:
    files: list[FileEntry]
    next_cursor: str


_FILES_SQL = f"""
SELECT f.path, f.language, f.size_bytes
FROM repositories r JOIN files f ON f.repository_id = r.id
WHERE r.slug = $3 AND {repository_readable("r", "$1", "$2")}
  AND left(f.path, length($4)) = $4 AND ($5::text IS NULL OR f.path > $5)
ORDER BY f.path
LIMIT $6
"""


async def list_files(
    conn: asyncpg.Connection,
    viewer: Viewer,
    *,
    repo: str,
    prefix: str,
    cursor: str,
    cursors: CursorCodec,
    limit: int | None,
) -> FilePage:
    prefix = check_path(prefix, "prefix", prefix=True)
    size = check_limit(
        limit, limits.FILES_LIMIT_MIN, limits.FILES_LIMIT_MAX, limits.FILES_LIMIT_DEFAULT, "limit"
    )
    scope = f"files\x00{repo}\x00{prefix}"
    position = cursors.decode(cursor, "files", scope, (PATH_FIELD,))
    after: str | None = None if position is None else position[0]
    await require_repository(conn, repo, viewer)
    rows = await conn.fetch(
        _FILES_SQL, viewer.principal_id, viewer.admin, repo, prefix, after, size + 1
    )
    files = [FileEntry(r["path"], r["language"], int(r["size_bytes"])) for r in rows[:size]]
    next_cursor = cursors.encode("files", scope, [files[-1].path]) if len(rows) > size else ""
    return FilePage(files, next_cursor)


# ---------------------------------------------------------------- grep


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line: int
    text: str
    repo: str = ""
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GrepResult:
    matches: list[GrepMatch]
    truncated: bool
    commit: str  # the repository's, when one was asked for
    commits: dict[str, str] = field(default_factory=dict)  # slug -> commit, for the matches


# How grep's statement is planned: for its own pattern, every time (see grep()).
GREP_PLANNING = "SET LOCAL plan_cache_mode = force_custom_plan"


def like_escape(text: str) -> str:
    """`text` as a LIKE pattern matching itself (with the default escape character)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def glob_to_like(glob: str) -> str:
    """A path glob as a LIKE pattern: `*` (and `**`) match any run of characters, `/`
    included; `?` one character; everything else itself."""
    out: list[str] = []
    for char in glob:
        if char == "*":
            if not out or out[-1] != "%":
                out.append("%")
        elif char == "?":
            out.append("_")
        else:
            out.append(like_escape(char))
    return "".join(out)


def check_pattern(pattern: str, regex: bool) -> str:
    if not pattern:
        raise InvalidArgument("pattern is required")
    if len(pattern) > limits.GREP_PATTERN_MAX_CHARS:
        raise InvalidArgument(f"pattern is at most {limits.GREP_PATTERN_MAX_CHARS} characters")
    if "\x00" in pattern or "\n" in pattern or "\r" in pattern:
        raise InvalidArgument("pattern must be one line, without NUL characters")
    if regex and (pattern.startswith("***") or pattern.startswith("(?")):
        # Director prefixes and embedded options would change how every line is matched
        # (the statement adds its own newline-sensitive option); `(?i)` has its own field,
        # so that the statement, not the pattern, says how letters compare.
        raise InvalidArgument(
            "pattern must not start with *** or an embedded option (?...); "
            "for (?i) set case_insensitive instead"
        )
    if regex:
        cost = regex_cost(pattern)
        if cost.backreference:
            raise InvalidArgument(
                "pattern must not use back-references (\\1 ...): their matching time is unbounded"
            )
        if cost.states > REGEX_STATES_MAX:
            raise InvalidArgument(
                f"pattern is too complex: its counted repetitions ({{m,n}}) expand to about "
                f"{cost.states} states, at most {REGEX_STATES_MAX} are allowed; use smaller "
                "bounds or fewer nested repetitions"
            )
    return pattern


def check_context(value: int) -> int:
    if not limits.GREP_CONTEXT_MIN <= value <= limits.GREP_CONTEXT_MAX:
        raise InvalidArgument(
            f"context must be between {limits.GREP_CONTEXT_MIN} and {limits.GREP_CONTEXT_MAX}"
        )
    return value


def matches_allowed(limit: int, context: int) -> int:
    """How many matches one answer may hold: `limit`, or fewer when their context lines
    would take the answer past GREP_ANSWER_LINES_MAX (each match counts its own line and
    2 * context lines, overlaps or file edges notwithstanding, so the cap is known before
    the statement runs)."""
    return max(1, min(limit, limits.GREP_ANSWER_LINES_MAX // (1 + 2 * context)))


def _grep_sql(regex: bool, case_insensitive: bool = False) -> str:
    # Candidate files through the trigram index on the whole text, then their lines. A
    # regular expression runs newline-sensitive ((?n)) on the whole text, so ^ and $ match
    # at line boundaries there as they do on each line. Case-insensitive matching uses
    # PostgreSQL's own ILIKE and ~* (both served by the trigram index), never lower() on
    # the text, which the index cannot serve.
    # $3 is the repository, or NULL for every readable one (a custom plan, GREP_PLANNING,
    # folds the test away). $4 filters files (the pattern, or its LIKE form), $5 lines
    # (the pattern as given).
    # Without a repository, default branches only: a repository's indexed refs (migration
    # 0016) would repeat its matches.
    readable = (
        "(($3::text IS NULL AND r.parent_id IS NULL) OR r.slug = $3::text) "
        f"AND {repository_readable('r', '$1', '$2')}"
    )
    glob = "($6::text IS NULL OR c.path LIKE $6)"
    if not regex:
        # A literal has no newline, so every file that holds it holds it on some line: the
        # first $7 matching lines lie in the first $7 matching files. Only those files are
        # split, not every file that matches (a common literal matches thousands).
        like = "ILIKE" if case_insensitive else "LIKE"
        # ILIKE compares lower() of both sides (in a multi-byte encoding), so the lines are
        # cut by the same rule that picked their files.
        line_matches = (
            "strpos(lower(l.text), lower($5::text)) > 0"
            if case_insensitive
            else "strpos(l.text, $5::text) > 0"
        )
        return f"""
        SELECT f.repository_id, f.repo, f.commit_sha, f.path, l.n::int AS line,
               left(l.text, {limits.GREP_LINE_MAX_CHARS}) AS text
        FROM (
            SELECT r.id AS repository_id, r.slug AS repo, r.commit_sha, c.path, c.content
            FROM repositories r
            JOIN file_contents c ON c.repository_id = r.id
            WHERE {readable} AND c.content {like} $4 AND {glob}
            ORDER BY r.slug, c.path
            LIMIT $7
        ) f
        CROSS JOIN LATERAL regexp_split_to_table(f.content, E'\\n') WITH ORDINALITY AS l(text, n)
        WHERE {line_matches}
        ORDER BY f.repo, f.path, l.n
        LIMIT $7
        """
    # A regular expression can match across lines in the whole text (\s matches a newline)
    # without matching any one line, so its files cannot be cut to $7 first.
    op = "~*" if case_insensitive else "~"
    return f"""
    SELECT r.id AS repository_id, r.slug AS repo, r.commit_sha, c.path, l.n::int AS line,
           left(l.text, {limits.GREP_LINE_MAX_CHARS}) AS text
    FROM repositories r
    JOIN file_contents c ON c.repository_id = r.id
    CROSS JOIN LATERAL regexp_split_to_table(c.content, E'\\n') WITH ORDINALITY AS l(text, n)
    WHERE {readable}
      AND c.content {op} ('(?n)' || $4::text) AND {glob}
      AND l.text {op} $5::text
    ORDER BY r.slug, c.path, l.n
    LIMIT $7
    """


def grep_statement(
    viewer: Viewer,
    *,
    repo: str,
    pattern: str,
    regex: bool,
    path_glob: str,
    rows: int,
    case_insensitive: bool = False,
) -> tuple[str, tuple[Any, ...]]:
    """The statement grep runs and its parameters, for at most `rows` rows (grep asks for
    one more than its limit, to tell a truncated answer); an empty `repo` means every
    repository the viewer may read. The arguments are taken as given: grep validates them
    first. For measuring the statement (bench/grep.py)."""
    args = (
        viewer.principal_id,
        viewer.admin,
        repo or None,
        pattern if regex else "%" + like_escape(pattern) + "%",
        pattern,
        glob_to_like(path_glob) if path_glob else None,
        rows,
    )
    return _grep_sql(regex, case_insensitive), args


async def grep(
    conn: asyncpg.Connection,
    viewer: Viewer,
    *,
    repo: str,
    pattern: str,
    regex: bool,
    path_glob: str,
    limit: int | None,
    case_insensitive: bool = False,
    context: int = 0,
) -> GrepResult:
    """Matching lines of one repository (`repo`), or of every repository the viewer may
    read (`repo` empty: none readable is an empty answer), by repository, path and line."""
    pattern = check_pattern(pattern, regex)
    if len(path_glob) > limits.GREP_GLOB_MAX_CHARS or _CONTROL.search(path_glob):
        raise InvalidArgument(
            f"path_glob is at most {limits.GREP_GLOB_MAX_CHARS} characters, "
            "without control characters"
        )
    size = check_limit(
        limit, limits.GREP_LIMIT_MIN, limits.GREP_LIMIT_MAX, limits.GREP_LIMIT_DEFAULT, "limit"
    )
    context = check_context(context)
    size = matches_allowed(size, context)
    if repo:
        await require_repository(conn, repo, viewer)
    sql, args = grep_statement(
        viewer,
        repo=repo,
        pattern=pattern,
        regex=regex,
        path_glob=path_glob,
        rows=size + 1,
        case_insensitive=case_insensitive,
    )
    started = time.monotonic()
    try:
        # One snapshot for the matches, their context and the commit they are reported at.
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            # Planned for this pattern every time: after five runs of a prepared statement
            # PostgreSQL may switch to a generic plan that cannot see the pattern and always
            # takes the trigram index, which for a pattern without trigrams (or a common
            # one) reads every file and outlasts the deadline (bench/notes/grep.md, "Grep").
            await conn.execute(f"SET LOCAL statement_timeout = {GREP_TIMEOUT_MS}; {GREP_PLANNING}")
            found = await conn.fetch(
                sql, *args, timeout=GREP_TIMEOUT_MS / 1000 + GREP_CLIENT_MARGIN_S
            )
            rows = found[:size]
            commit = ""
            if repo:
                commit = await conn.fetchval(
                    "SELECT commit_sha FROM repositories WHERE slug = $1", repo
                )
            lines = await _context_lines(conn, rows, context, started) if context else None
    except asyncpg.InvalidRegularExpressionError as err:
        raise InvalidArgument(f"pattern is not a valid regular expression: {err}") from None
    except (asyncpg.ProgramLimitExceededError, asyncpg.OutOfMemoryError) as err:
        raise InvalidArgument(f"pattern is too complex: {err}") from None
    except asyncpg.InternalServerError as err:
        # PostgreSQL's regex compiler asks for memory in proportion to the pattern and says
        # so with an internal error; the cost check above keeps patterns far from it.
        if "invalid memory alloc request size" not in str(err):
            raise
        raise InvalidArgument("pattern is too complex: it needs too much memory") from None
    except (asyncpg.QueryCanceledError, TimeoutError):
        raise DeadlineExceeded(
            f"grep gave up after {GREP_TIMEOUT_MS // 1000} s; narrow the pattern or path_glob"
        ) from None
    matches = [_match(row, lines, context) for row in rows]
    commits = {row["repo"]: row["commit_sha"] for row in rows}
    return GrepResult(matches, len(found) > size, commit or "", commits)


# The context query and the lines it found, by (file number, line).
_ContextLines = tuple[ContextQuery, dict[tuple[int, int], str]]


def _match(row: asyncpg.Record, lines: _ContextLines | None, context: int) -> GrepMatch:
    if lines is None:
        return GrepMatch(row["path"], row["line"], row["text"], row["repo"])
    query, texts = lines
    at = Located(row["repository_id"], row["path"], row["line"])
    before, after = surrounding(texts, query.file_of(at), at.line, context)
    return GrepMatch(row["path"], row["line"], row["text"], row["repo"], before, after)


async def _context_lines(
    conn: asyncpg.Connection, rows: list[asyncpg.Record], context: int, started: float
) -> _ContextLines:
    """The context lines of the matches in `rows`, by (file number, line), read in the
    matches' transaction within what is left of grep's timeout."""
    query = context_query(
        [Located(r["repository_id"], r["path"], r["line"]) for r in rows], context
    )
    if not query.wanted:
        return query, {}
    left_ms = GREP_TIMEOUT_MS - int((time.monotonic() - started) * 1000)
    if left_ms <= 0:
        raise TimeoutError
    await conn.execute(f"SET LOCAL statement_timeout = {left_ms}")
    found = await conn.fetch(
        CONTEXT_SQL, *query.args(), timeout=left_ms / 1000 + GREP_CLIENT_MARGIN_S
    )
    return query, {(r["file"], r["line"]): r["text"] for r in found}

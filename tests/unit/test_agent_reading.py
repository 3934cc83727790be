"""The pure parts of read, files and grep: path checks, line slicing, globs, grep's context
lines (cursors: test_cursors.py)."""

from __future__ import annotations

import pytest

from cograph_api import limits
from retrieval.indexing.index_store import content_line_count
from retrieval.search.grep_context import Located, context_query, surrounding
from retrieval.search.reading import (
    check_context,
    check_path,
    check_pattern,
    glob_to_like,
    like_escape,
    matches_allowed,
    slice_lines,
    split_lines,
)
from svckit.errors import InvalidArgument


@pytest.mark.parametrize(
    "path",
    [
        "../etc/passwd",
        "a/../../b",
        "/etc/passwd",
        "a/./b",
        "a//b",
        "a/b\x00.py",
        "a\nb",
        "C:\\windows",
        "",
        "x" * (limits.PATH_MAX_CHARS + 1),
    ],
)
def test_hostile_paths_are_refused(path: str) -> None:
    with pytest.raises(InvalidArgument):
        check_path(path)


def test_plain_paths_and_prefixes_pass() -> None:
    assert check_path("src/app.py") == "src/app.py"
    assert check_path("a b/c..d.py") == "a b/c..d.py"
    assert check_path("", "prefix", prefix=True) == ""
    assert check_path("src/", "prefix", prefix=True) == "src/"
    with pytest.raises(InvalidArgument):
        check_path("../", "prefix", prefix=True)


def test_lines_split_on_newline_only() -> None:
    assert split_lines("") == []
    assert split_lines("a\nb\n") == ["a\n", "b\n"]
    assert split_lines("a\r\nb") == ["a\r\n", "b"]
    assert split_lines("a\x0cb\n") == ["a\x0cb\n"]  # a form feed ends no line
    for text in ("", "a", "a\n", "a\nb", "a\n\n"):
        assert content_line_count(text) == len(split_lines(text))


def test_slice_returns_the_range_and_no_continuation() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 11))
    cut = slice_lines(text, 3, 5)
    assert (cut.start_line, cut.end_line, cut.total_lines) == (3, 5, 10)
    assert cut.content == "line 3\nline 4\nline 5\n"
    assert cut.next_start_line is None
    whole = slice_lines(text, None, None)
    assert whole.content == text and whole.end_line == 10
    past = slice_lines(text, 9, 400)
    assert (past.end_line, past.next_start_line) == (10, None)


def test_slice_is_cut_at_the_caps_with_a_continuation() -> None:
    text = "".join(f"{i:04d}\n" for i in range(1, 101))
    by_lines = slice_lines(text, 1, None, max_lines=30)
    assert (by_lines.end_line, by_lines.next_start_line) == (30, 31)
    by_chars = slice_lines(text, 10, 50, max_chars=25)  # 5 chars a line
    assert (by_chars.start_line, by_chars.end_line, by_chars.next_start_line) == (10, 14, 15)
    assert len(by_chars.content) <= 25
    long_line = "x" * 100 + "\nshort\n"
    head = slice_lines(long_line, 1, None, max_chars=40)
    assert head.content == "x" * 40 and head.next_start_line == 2
    # Continuing always makes progress and ends.
    start, seen = 1, 0
    while True:
        part = slice_lines(text, start, None, max_chars=64)
        seen += part.end_line - part.start_line + 1
        if part.next_start_line is None:
            break
        start = part.next_start_line
    assert seen == 100


@pytest.mark.parametrize(("start", "end"), [(0, None), (-1, 3), (5, 4), (12, None)])
def test_bad_ranges_are_refused(start: int, end: int | None) -> None:
    with pytest.raises(InvalidArgument):
        slice_lines("a\n" * 10, start, end)


def test_an_empty_file_reads_as_nothing() -> None:
    cut = slice_lines("", None, None)
    assert (cut.start_line, cut.end_line, cut.total_lines, cut.content) == (1, 0, 0, "")


def test_globs_become_like_patterns() -> None:
    assert glob_to_like("*.py") == "%.py"
    assert glob_to_like("src/**/test_?.py") == "src/%/test\\__.py"
    assert glob_to_like("100%") == "100\\%"
    assert like_escape("a_b%c\\") == "a\\_b\\%c\\\\"


def test_patterns_are_validated() -> None:
    assert check_pattern("def f(", regex=False) == "def f("
    for bad in ("", "x" * (limits.GREP_PATTERN_MAX_CHARS + 1), "a\x00b", "a\nb"):
        with pytest.raises(InvalidArgument):
            check_pattern(bad, regex=False)
    for bad in ("(?i)retry", "***=literal"):
        with pytest.raises(InvalidArgument):
            check_pattern(bad, regex=True)
    # As literal text, an inline flag is just text to find.
    assert check_pattern("(?i)retry", regex=False) == "(?i)retry"
    with pytest.raises(InvalidArgument, match="case_insensitive"):
        check_pattern("(?i)retry", regex=True)


def test_context_is_bounded_and_shrinks_the_matches_an_answer_holds() -> None:
    assert check_context(limits.GREP_CONTEXT_MIN) == limits.GREP_CONTEXT_MIN
    assert check_context(limits.GREP_CONTEXT_MAX) == limits.GREP_CONTEXT_MAX
    for bad in (limits.GREP_CONTEXT_MIN - 1, limits.GREP_CONTEXT_MAX + 1):
        with pytest.raises(InvalidArgument, match="context"):
            check_context(bad)
    # Without context the limit alone counts; with it, each match weighs 1 + 2 * context.
    assert matches_allowed(limits.GREP_LIMIT_MAX, 0) == limits.GREP_LIMIT_MAX
    assert matches_allowed(7, limits.GREP_CONTEXT_MAX) == 7
    widest = matches_allowed(limits.GREP_LIMIT_MAX, limits.GREP_CONTEXT_MAX)
    lines_each = 1 + 2 * limits.GREP_CONTEXT_MAX
    assert widest * lines_each <= limits.GREP_ANSWER_LINES_MAX < (widest + 1) * lines_each


def test_context_query_asks_each_file_once_and_no_line_before_the_first() -> None:
    matches = [Located(7, "a.py", 1), Located(7, "a.py", 3), Located(9, "a.py", 10)]
    query = context_query(matches, 2)
    assert query.files == {(7, "a.py"): 1, (9, "a.py"): 2}
    # File 1: lines 1..5, once (a match may be another's context); never a line 0. File 2:
    # 8..12 but the matching line, which the match itself carries.
    assert query.wanted == [(1, n) for n in range(1, 6)] + [(2, 8), (2, 9), (2, 11), (2, 12)]
    assert query.args() == (
        [7, 9],
        ["a.py", "a.py"],
        [1, 1, 1, 1, 1, 2, 2, 2, 2],
        [1, 2, 3, 4, 5, 8, 9, 11, 12],
    )
    assert query.file_of(matches[2]) == 2
    assert context_query(matches, 0).wanted == []


def test_surrounding_lines_stop_where_the_file_does() -> None:
    # A three-line file: what CONTEXT_SQL finds for it (no line past the third).
    found = {(1, 1): "one", (1, 2): "two", (1, 3): "three"}
    assert surrounding(found, 1, 1, 2) == ([], ["two", "three"])
    assert surrounding(found, 1, 3, 2) == (["one", "two"], [])
    assert surrounding(found, 1, 2, 5) == (["one"], ["three"])
    assert surrounding(found, 2, 2, 1) == ([], [])

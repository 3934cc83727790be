"""The grep benchmark's pure parts: plan reading, percentiles, the pattern table, the corpus
helpers and the report table (bench/grep.py); and the statement grep() runs."""

from __future__ import annotations

import re

import pytest

from bench.grep import (
    INDEX,
    PATTERNS,
    Pattern,
    auto_explain_plan,
    content_line_count,
    execution_ms,
    file_contents_access,
    file_matches,
    glob_regex,
    percentile,
    ratio,
    scan_nodes,
    spread,
    table,
    uses_index,
)
from cograph_api.access_rules import Viewer
from retrieval.indexing import index_store
from retrieval.search import reading

TRIGRAM_PLAN = """\
Limit  (cost=172.31..172.32 rows=1 width=82) (actual time=18.097..18.103 rows=1.00 loops=1)
  Buffers: shared hit=86
  ->  Sort  (cost=172.31..172.32 rows=1 width=82) (actual time=18.096..18.102 rows=1.00 loops=1)
        Sort Key: c.path, l.n
        ->  Nested Loop (actual time=0.550..18.097 rows=1.00 loops=1)
              ->  Nested Loop (actual time=0.164..17.651 rows=1.00 loops=1)
                    Join Filter: (r.id = c.repository_id)
                    ->  Seq Scan on repositories r (actual time=0.004..0.009 rows=1.00 loops=1)
                          SubPlan 2
                            ->  Bitmap Heap Scan on grants g (never executed)
                                  ->  Bitmap Index Scan on grants_principal (never executed)
                    ->  Bitmap Heap Scan on file_contents c
                          Recheck Cond: (content ~ '(?n)def\\s+getaddrinfo\\('::text)
                          ->  Bitmap Index Scan on file_contents_trgm
                                Index Cond: (content ~ '(?n)def\\s+getaddrinfo\\('::text)
              ->  Function Scan on regexp_split_to_table l
Planning Time: 0.557 ms
Execution Time: 18.139 ms
""".splitlines()

SEQ_PLAN = """\
Limit  (cost=13385.66..13385.91 rows=101 width=82)
  ->  Gather Merge  (cost=1000.00..2000.00 rows=100 width=82)
        ->  Nested Loop  (cost=0.00..9544.30 rows=100320 width=82)
              ->  Seq Scan on repositories r  (cost=0.00..9.16 rows=1 width=8)
              ->  Parallel Seq Scan on file_contents c  (cost=0.00..185.00 rows=627 width=562)
                    Filter: (content ~ '(?n)\\d+\\.\\d+'::text)
""".splitlines()

PKEY_PLAN = """\
Limit  (cost=0.42..100.00 rows=101 width=82)
  ->  Incremental Sort  (cost=0.42..100.00 rows=101 width=82)
        ->  Index Scan using file_contents_pkey on file_contents c
              Filter: (content ~~ '%import os%'::text)
""".splitlines()


# ---------------------------------------------------------------- plans


def test_scan_nodes_lists_every_scan_top_to_bottom() -> None:
    assert scan_nodes(TRIGRAM_PLAN) == [
        "Seq Scan on repositories",
        "Bitmap Heap Scan on grants",
        "Bitmap Index Scan on grants_principal",
        "Bitmap Heap Scan on file_contents",
        "Bitmap Index Scan on file_contents_trgm",
    ]
    assert scan_nodes(PKEY_PLAN) == ["Index Scan using file_contents_pkey on file_contents"]
    assert "Parallel Seq Scan on file_contents" in scan_nodes(SEQ_PLAN)


def test_conditions_and_query_text_are_not_scans() -> None:
    assert scan_nodes(["Recheck Cond: (content ~ 'Seq Scan on file_contents_trgm')"]) == []
    assert scan_nodes(["Query Text: SELECT 1 FROM file_contents"]) == []


def test_uses_index_only_for_the_trigram_index() -> None:
    assert uses_index(TRIGRAM_PLAN)
    assert not uses_index(SEQ_PLAN)
    assert not uses_index(PKEY_PLAN)  # an index, but not the trigram one
    assert uses_index(PKEY_PLAN, "file_contents_pkey")
    assert not uses_index([])
    assert INDEX == "file_contents_trgm"


def test_file_contents_access_names_the_path_to_the_text() -> None:
    assert file_contents_access(TRIGRAM_PLAN) == "trigram index"
    assert file_contents_access(SEQ_PLAN) == "sequential scan"
    assert file_contents_access(PKEY_PLAN) == "primary key"
    assert file_contents_access(PKEY_PLAN + TRIGRAM_PLAN) == "primary key + trigram index"
    assert file_contents_access(["Result  (cost=0.00..0.01 rows=1 width=4)"]) == "?"


def test_execution_ms_reads_explain_analyze() -> None:
    assert execution_ms(TRIGRAM_PLAN) == pytest.approx(18.139)
    assert execution_ms(SEQ_PLAN) is None  # a plan without ANALYZE


def test_auto_explain_message_becomes_a_plan_with_its_time() -> None:
    message = [
        "duration: 5123.456 ms  plan:",
        "Query Text: ",
        "    SELECT c.path FROM file_contents c",
        "    LIMIT $7",
        *TRIGRAM_PLAN[:-2],
    ]
    plan = auto_explain_plan(message)
    assert plan[0].startswith("Limit")
    assert plan[-1] == "Execution Time: 5123.456 ms"
    assert execution_ms(plan) == pytest.approx(5123.456)
    assert uses_index(plan)
    assert auto_explain_plan(["something else"]) == ["something else"]


# ---------------------------------------------------------------- figures


def test_percentile_is_the_nearest_rank() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 5.0
    assert percentile(values, 0.95) == 5.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile(list(map(float, range(1, 101))), 0.95) == 95.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_ratio_is_seq_over_index() -> None:
    assert ratio(100.0, 4.0) == 25.0
    assert ratio(1.0, 0.0) == float("inf")


# ---------------------------------------------------------------- patterns


def test_the_table_covers_the_cases_of_the_issue() -> None:
    names = [p.name for p in PATTERNS]
    assert len(set(names)) == len(names)
    literals = [p for p in PATTERNS if not p.regex]
    regexes = [p for p in PATTERNS if p.regex]
    assert {"rare literal", "common literal"} <= set(names)
    assert {"rare regex", "common regex"} <= set(names)
    # LIKE's metacharacters, escaped by grep: the LIKE form matches only the text itself.
    meta = [p for p in literals if "%" in p.pattern and "_" in p.pattern]
    assert meta
    like = reading.like_escape(meta[0].pattern)
    assert "\\%" in like and "\\_" in like
    # A literal scoped by path_glob.
    assert any(p.path_glob for p in literals)
    # A regex pg_trgm can extract no trigram from: no run of three word characters.
    assert any(not re.search(r"[A-Za-z0-9]{3}", p.pattern) for p in regexes)


@pytest.mark.parametrize("p", PATTERNS, ids=lambda p: p.name)
def test_every_pattern_is_one_grep_accepts(p: Pattern) -> None:
    assert reading.check_pattern(p.pattern, p.regex) == p.pattern
    if p.regex:
        re.compile(p.pattern)
    if p.path_glob:
        assert reading.glob_to_like(p.path_glob)


def test_file_matches_literal_regex_and_glob() -> None:
    literal = Pattern("l", "%s_%s")
    assert file_matches(literal, "a.py", "x = '%s_%s' % (a, b)\n")
    assert not file_matches(literal, "a.py", "x = '%sX%s'\n")  # `_` is no wildcard here
    line_start = Pattern("r", r"^\s*raise \w+Error\(", regex=True)
    assert file_matches(line_start, "a.py", "def f():\n    raise ValueError('x')\n")
    assert not file_matches(line_start, "a.py", "x = 1  # raise ValueError(\n")
    scoped = Pattern("g", "def __init__", path_glob="torch/nn/**")
    assert file_matches(scoped, "torch/nn/modules/linear.py", "def __init__(self):\n")
    assert not file_matches(scoped, "torch/optim/sgd.py", "def __init__(self):\n")


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("torch/nn/**", "torch/nn/modules/linear.py", True),
        ("torch/nn/**", "torch/nnx.py", False),
        ("*.py", "a/b/c.py", True),  # `*` crosses `/`, as in glob_to_like
        ("a?c.py", "abc.py", True),
        ("a?c.py", "ac.py", False),
        ("a.b", "axb", False),  # `.` is itself
    ],
)
def test_glob_regex_means_what_glob_to_like_means(glob: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(glob).fullmatch(path)) is matches
    like = reading.glob_to_like(glob)
    assert bool(re.fullmatch(like_as_regex(like), path, re.DOTALL)) is matches


def like_as_regex(like: str) -> str:
    """A LIKE pattern read back as a regex: % any run, _ one character, \\x itself."""
    out = []
    escaped = False
    for char in like:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
    return "".join(out)


# ---------------------------------------------------------------- corpus


def test_spread_takes_evenly_spaced_items() -> None:
    items = list(range(10))
    assert spread(items, 5) == [0, 2, 4, 6, 8]
    assert spread(items, 10) == items
    assert spread(items, 50) == items
    assert spread(items, 0) == []
    assert spread(items, 3) == [0, 3, 6]


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "a\nb\n", "\n\n", "a\r\nb"])
def test_line_count_is_the_indexers(text: str) -> None:
    assert content_line_count(text) == index_store.content_line_count(text)
    assert content_line_count(text) == len(reading.split_lines(text))


# ---------------------------------------------------------------- report


def test_table_renders_one_row_per_pattern() -> None:
    row = {
        "pattern": "literal with % and _",
        "text": "a|b",
        "regex": False,
        "path_glob": "torch/**",
        "files_matching": 1234,
        "grep_p50_ms": 12.34,
        "grep_p95_ms": 20.0,
        "grep_timeouts": 2,
        "runs": 7,
        "matches": 100,
        "truncated": True,
        "access_grep": "trigram index",
        "grep_plan_ms": 7654.3,
        "custom_p50_ms": 10.0,
        "access_explain": "sequential scan",
        "seq_p50_ms": 50.0,
        "seq_over_grep": 4.05,
        "seq_over_custom": 5.0,
    }
    lines = table([row, {**row, "access_grep": None, "grep_timeouts": 0, "truncated": False}])
    timed_out = table([{**row, "matches": None, "grep_timeouts": 7}]).splitlines()[2]
    assert "- (timed out)" in timed_out and "(7/7 timed out)" in timed_out
    assert len(lines.splitlines()) == 4
    first = lines.splitlines()[2]
    assert "`a\\|b` in `torch/**` (literal)" in first
    assert "1,234" in first and "12.3 / 20.0 (2/7 timed out)" in first
    assert "100 (truncated)" in first and "4.05x" in first and "5.00x" in first
    assert "| trigram index, 7654 |" in first
    last = lines.splitlines()[3]
    assert "| n/a |" in last and "timed out" not in last and "truncated" not in last
    # Every row has as many cells as the header.
    assert {line.count(" | ") for line in lines.splitlines()[2:]} == {
        lines.splitlines()[0].count(" | ")
    }


# ---------------------------------------------------------------- the statement


def test_grep_statement_binds_what_grep_binds() -> None:
    viewer = Viewer("me", False)
    sql, args = reading.grep_statement(
        viewer, repo="h/o/r", pattern="50%_x", regex=False, path_glob="src/*.py", rows=101
    )
    assert "c.content LIKE $4" in sql and "strpos(l.text, $5::text)" in sql
    assert args == ("me", False, "h/o/r", "%50\\%\\_x%", "50%_x", "src/%.py", 101)
    sql, args = reading.grep_statement(
        viewer, repo="h/o/r", pattern=r"^\d+$", regex=True, path_glob="", rows=11
    )
    assert "c.content ~ ('(?n)' || $4::text)" in sql and "l.text ~ $5::text" in sql
    assert args == ("me", False, "h/o/r", r"^\d+$", r"^\d+$", None, 11)

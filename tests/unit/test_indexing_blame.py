"""git blame porcelain -> per-line commit times -> node spans."""

from __future__ import annotations

from datetime import UTC, datetime

from retrieval.indexing.blame import LineTimes, parse_porcelain

A = "a" * 40
B = "b" * 40
ZERO = "0" * 40
FALLBACK = datetime(2030, 1, 1, tzinfo=UTC)

PORCELAIN = f"""{A} 1 1 2
author X
author-time 1704067200
committer X
committer-time 1704067200
filename f.py
\tline one
{A} 2 2
\tline two
{B} 3 3 1
author Y
author-time 1709251200
committer-time 1709251200
filename f.py
\tcommitter-time 1 (content, not a header)
{ZERO} 4 4 1
author Not Committed Yet
committer-time 1900000000
filename f.py
\tuncommitted
""".encode()


def test_times_per_line_with_uncommitted_fallback() -> None:
    times = parse_porcelain(PORCELAIN, FALLBACK)
    jan = datetime.fromtimestamp(1704067200, tz=UTC)
    mar = datetime.fromtimestamp(1709251200, tz=UTC)
    assert times == [jan, jan, mar, FALLBACK]
    lines = LineTimes(times, FALLBACK)
    assert lines.span(1, 2) == (jan, jan)
    assert lines.span(2, 3) == (jan, mar)
    assert lines.newest == FALLBACK


def test_span_outside_the_file_falls_back() -> None:
    lines = LineTimes([], FALLBACK)
    assert lines.span(1, 10) == (FALLBACK, FALLBACK)
    assert lines.newest == FALLBACK

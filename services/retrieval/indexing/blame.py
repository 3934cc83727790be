"""Per-line commit times from one `git blame` per file; node and chunk times from them.

A node's created time is the oldest commit touching its lines and its last-changed time
the newest, so `since` means "changed in the repository", not "re-indexed". Lines blame
cannot date fall back to the indexed commit's time, and plain directories to the file's
mtime (indexing/snapshots.py runs blame and picks the fallback).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

_HEADER = re.compile(rb"^([0-9a-f]{40}) \d+ (\d+)(?: \d+)?$")
_UNCOMMITTED = b"0" * 40


@dataclass(frozen=True, slots=True)
class LineTimes:
    """Commit time of every line of a file (index 0 is line 1), and a fallback."""

    times: Sequence[datetime]
    fallback: datetime

    def span(self, start_line: int, end_line: int) -> tuple[datetime, datetime]:
        """(created, last_changed) over lines start..end, 1-based inclusive."""
        window = self.times[max(start_line - 1, 0) : max(end_line, 0)]
        if not window:
            return self.fallback, self.fallback
        return min(window), max(window)

    @property
    def newest(self) -> datetime:
        return max(self.times) if self.times else self.fallback


def parse_porcelain(output: bytes, fallback: datetime) -> list[datetime]:
    """Line times from `git blame --porcelain` output, using committer-time.

    Porcelain prints a commit's headers only the first time it appears, so the times are
    remembered per commit; uncommitted lines (the all-zero commit) get `fallback`.
    """
    commit_times: dict[bytes, datetime] = {}
    by_line: dict[int, bytes] = {}
    current: bytes | None = None
    for raw in output.split(b"\n"):
        if raw.startswith(b"\t"):
            continue
        header = _HEADER.match(raw)
        if header:
            current = header.group(1)
            by_line[int(header.group(2))] = current
            continue
        if current is not None and raw.startswith(b"committer-time "):
            stamp = int(raw.split(b" ", 1)[1])
            commit_times[current] = datetime.fromtimestamp(stamp, tz=UTC)
    if not by_line:
        return []
    times: list[datetime] = []
    for line in range(1, max(by_line) + 1):
        commit = by_line.get(line)
        if commit is None or commit == _UNCOMMITTED:
            times.append(fallback)
        else:
            times.append(commit_times.get(commit, fallback))
    return times

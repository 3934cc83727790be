"""Grep on a large repository: does the trigram index pick the candidate files, and how fast
is grep?

One repository is written straight into the retrieval tables (no indexer, no embedding):
real source text from the packages installed in this environment (site-packages: every
`.py` file, then `.pyi`, `.pyx`, C and C++ sources and headers until --files; evenly spread
over the sorted paths when there are more), one `files` row and one `file_contents` row per
file, as index_store writes them (sha256 content hash, generation 0, NUL stored as U+FFFD,
files over the indexer's 1 MB cap skipped). The trigram index `file_contents_trgm` is built
after the load (with the migration's own definition), then VACUUM ANALYZE.

Each pattern of PATTERNS then runs through the service's own `reading.grep()` (a public
repository, a non-admin viewer, the default limit), --runs times after a warm-up call, on
one connection made as the service's pool makes them. asyncpg prepares a statement once
per connection, and PostgreSQL plans a prepared statement for its parameters five times,
then may keep a generic plan made without them (which is why grep() sets
reading.GREP_PLANNING: a plan for each pattern); the connection has run both grep
statements PRIME times first, as a pooled connection soon has. For each pattern:

  * the plan grep()'s statement runs with on that connection, with its actual rows and
    times: once more after the timed calls, through the same prepared statement but
    without the deadline (auto_explain with log_analyze, when the server lets the
    session load it);
  * the same statement with the same parameters planned for them
    (plan_cache_mode = force_custom_plan): EXPLAIN (ANALYZE, BUFFERS), then timed
    --statement-runs times;
  * the baseline, in the same run: that statement with the index disabled
    (SET LOCAL enable_bitmapscan = off, enable_indexscan = off): its plan, then timed
    --statement-runs times. Neither has grep's 5 s deadline, so a scan's full cost shows.

    .venv/bin/python -m bench.grep                    # ~20,000 files
    .venv/bin/python -m bench.grep --files 2000 --runs 3 --statement-runs 2

Writes bench/out/grep/grep.{md,json}. Run it as a module from the repository root. Without
COGRAPH_DATABASE_URL an embedded PostgreSQL is started in a temporary directory; with it, a
scratch database is created on that server and dropped afterwards (--keep keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import re
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from bench.databases import scratch_database
from cograph_api import limits
from cograph_api.access_rules import Viewer
from retrieval.app import MIGRATIONS
from retrieval.search import reading
from svckit.db import DbTimeouts, create_pool
from svckit.errors import DeadlineExceeded
from svckit.migrations import migrate

SLUG = "bench.local/site-packages/grep"
PRINCIPAL = "bench-user"
MAX_FILE_BYTES = 1_000_000  # the indexer's default RETRIEVAL_MAX_FILE_BYTES
INDEX = "file_contents_trgm"
BASELINE_TIMEOUT_MS = 600_000
# PostgreSQL plans a prepared statement for its parameters five times, then may keep a
# generic plan: grep() is measured on a connection past that point, as a pooled one soon is.
PRIME = 6
# Python first, then other real source text to reach --files.
EXTENSIONS: tuple[tuple[str, str], ...] = (
    (".py", "python"),
    (".pyi", "python"),
    (".pyx", "text"),
    (".c", "c"),
    (".h", "c"),
    (".cpp", "cpp"),
)


# ---------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Pattern:
    name: str
    pattern: str
    regex: bool = False
    path_glob: str = ""


PATTERNS: tuple[Pattern, ...] = (
    Pattern("rare literal", "getaddrinfo"),
    Pattern("common literal", "import os"),
    Pattern("literal with % and _", "%s_%s"),
    Pattern("literal in path_glob", "def __init__", path_glob="torch/nn/**"),
    Pattern("rare regex", r"def\s+getaddrinfo\(", regex=True),
    Pattern("common regex", r"^\s*raise \w+Error\(", regex=True),
    Pattern("regex without trigrams", r"\d+\.\d+", regex=True),
)


def glob_regex(glob: str) -> re.Pattern[str]:
    """reading.glob_to_like's meaning as a Python regex: `*` any run (`/` included), `?`
    one character, the rest itself, the whole path."""
    out = []
    for char in glob:
        out.append(".*" if char == "*" else "." if char == "?" else re.escape(char))
    return re.compile("".join(out), re.DOTALL)


def file_matches(p: Pattern, path: str, text: str) -> bool:
    """Whether grep would return at least one line of this file (Python's `re` standing in
    for PostgreSQL's for the simple classes used in PATTERNS)."""
    if p.path_glob and not glob_regex(p.path_glob).fullmatch(path):
        return False
    if not p.regex:
        return p.pattern in text
    return re.search(p.pattern, text, re.MULTILINE) is not None


# ---------------------------------------------------------------- plans and figures


_SCAN = re.compile(
    r"((?:Parallel )?(?:Bitmap Index Scan|Bitmap Heap Scan|Index Only Scan|Index Scan|Seq Scan))"
    r"(?: using (\S+))?(?: on (\S+))?"
)


def scan_nodes(plan: Sequence[str]) -> list[str]:
    """The scan nodes of a text plan, top to bottom: 'Bitmap Index Scan on
    file_contents_trgm', 'Index Scan using file_contents_pkey on file_contents', ..."""
    found = []
    for line in plan:
        text = line.strip().removeprefix("->").strip()
        match = _SCAN.match(text)
        if match is None:
            continue
        kind, using, on = match.groups()
        found.append(" ".join(s for s in (kind, "using" if using else "", using, "on", on) if s))
    return found


def uses_index(plan: Sequence[str], index: str = INDEX) -> bool:
    """Whether the plan reads `index` (a bitmap or plain index scan on it)."""
    return any(
        node.endswith(f"on {index}") or f"using {index} " in node for node in scan_nodes(plan)
    )


def file_contents_access(plan: Sequence[str]) -> str:
    """How the plan reaches file_contents, in a word: trigram index, primary key (an
    ordered index scan), sequential scan; joined with '+' if more than one."""
    kinds = []
    for node in scan_nodes(plan):
        if node.endswith(f"on {INDEX}"):
            kind = "trigram index"
        elif "using file_contents_pkey" in node:
            kind = "primary key"
        elif "Seq Scan on file_contents" in node:
            kind = "sequential scan"
        else:
            continue
        if kind not in kinds:
            kinds.append(kind)
    return " + ".join(kinds) or "?"


def execution_ms(plan: Sequence[str]) -> float | None:
    """'Execution Time: 12.345 ms' of an EXPLAIN ANALYZE."""
    for line in plan:
        match = re.match(r"\s*Execution Time: ([\d.]+) ms", line)
        if match:
            return float(match.group(1))
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank, as the other benchmarks here: the value at round(q * (n - 1))."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ratio(seq_ms: float, index_ms: float) -> float:
    return seq_ms / index_ms if index_ms > 0 else float("inf")


# ---------------------------------------------------------------- corpus


@dataclass(frozen=True)
class SourceText:
    path: str
    language: str
    content: str
    content_hash: str
    size: int

    @property
    def lines(self) -> int:
        return content_line_count(self.content)


def content_line_count(text: str) -> int:
    """As index_store counts: a final newline does not start another line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def spread(items: Sequence[Any], n: int) -> list[Any]:
    """n items evenly spaced over `items` (all of them when there are no more than n)."""
    if n >= len(items):
        return list(items)
    if n <= 0:
        return []
    return [items[(i * len(items)) // n] for i in range(n)]


def source_paths(root: Path, files: int) -> list[tuple[Path, str]]:
    """Up to `files` (path, language) under root: every .py first, then the other
    extensions in EXTENSIONS order, each group spread evenly over its sorted paths."""
    chosen: list[tuple[Path, str]] = []
    for ext, language in EXTENSIONS:
        left = files - len(chosen)
        if left <= 0:
            break
        group = sorted(
            p
            for p in root.rglob(f"*{ext}")
            if "__pycache__" not in p.parts and p.is_file() and p.stat().st_size <= MAX_FILE_BYTES
        )
        chosen.extend((p, language) for p in spread(group, left))
    return chosen


def collect(root: Path, files: int) -> list[SourceText]:
    texts = []
    for path, language in source_paths(root, files):
        data = path.read_bytes()
        if b"\x00" in data[:8192] and language != "python":
            continue  # binary, as the indexer skips it
        text = data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        rel = path.relative_to(root).as_posix()
        texts.append(SourceText(rel, language, text, hashlib.sha256(data).hexdigest(), len(data)))
    return texts


async def load(conn: asyncpg.Connection, texts: list[SourceText]) -> dict[str, Any]:
    """Writes the repository, its files and their text; builds the trigram index after."""
    started = time.perf_counter()
    repository_id = await conn.fetchval(
        """
        INSERT INTO repositories (slug, source, source_kind, commit_sha, public, indexed_at,
                                  needs_linking, file_count)
        VALUES ($1, $2, 'dir', $3, true, now(), false, $4) RETURNING id
        """,
        SLUG,
        sysconfig.get_paths()["purelib"],
        "0" * 40,
        len(texts),
    )
    definition = await conn.fetchval("SELECT pg_get_indexdef($1::regclass)", INDEX)
    await conn.execute(f"DROP INDEX {INDEX}")  # built once after the load, not row by row
    chunk = 1000
    for start in range(0, len(texts), chunk):
        part = texts[start : start + chunk]
        await conn.copy_records_to_table(
            "files",
            records=[
                (repository_id, t.path, t.content_hash, t.language, "code", t.size, 0) for t in part
            ],
            columns=[
                "repository_id",
                "path",
                "content_hash",
                "language",
                "store",
                "size_bytes",
                "generation",
            ],
        )
        await conn.copy_records_to_table(
            "file_contents",
            records=[(repository_id, t.path, t.content, t.lines) for t in part],
            columns=["repository_id", "path", "content", "line_count"],
        )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    await conn.execute("SET maintenance_work_mem = '1GB'")
    await conn.execute(definition)
    index_s = time.perf_counter() - started
    started = time.perf_counter()
    await conn.execute("VACUUM ANALYZE repositories, files, file_contents")
    analyze_s = time.perf_counter() - started
    sizes = await conn.fetchrow(
        """
        SELECT pg_total_relation_size('file_contents') AS table_bytes,
               pg_relation_size($1::regclass) AS index_bytes,
               (SELECT sum(octet_length(content)) FROM file_contents) AS text_bytes
        """,
        INDEX,
    )
    return {
        "files": len(texts),
        "lines": sum(t.lines for t in texts),
        "text_mb": round(int(sizes["text_bytes"]) / 1e6, 1),
        "table_mb_with_toast_and_indexes": round(int(sizes["table_bytes"]) / 1e6, 1),
        "trgm_index_mb": round(int(sizes["index_bytes"]) / 1e6, 1),
        "languages": {
            lang: sum(1 for t in texts if t.language == lang)
            for lang in sorted({t.language for t in texts})
        },
        "load_s": round(load_s, 1),
        "index_build_s": round(index_s, 1),
        "vacuum_analyze_s": round(analyze_s, 1),
    }


# ---------------------------------------------------------------- measuring


@dataclass
class Measured:
    pattern: Pattern
    files_matching: int
    grep_ms: list[float] = field(default_factory=list)
    grep_timeouts: int = 0
    matches: int = 0
    truncated: bool = False
    custom_ms: list[float] = field(default_factory=list)  # planned for the pattern
    seq_ms: list[float] = field(default_factory=list)  # the index disabled
    plan_index: list[str] = field(default_factory=list)
    plan_seq: list[str] = field(default_factory=list)
    plan_grep: list[str] = field(default_factory=list)  # auto_explain of grep()'s last run

    def row(self) -> dict[str, Any]:
        grep_p50 = percentile(self.grep_ms, 0.5)
        seq_p50 = percentile(self.seq_ms, 0.5)
        custom_p50 = percentile(self.custom_ms, 0.5)
        return {
            "pattern": self.pattern.name,
            "text": self.pattern.pattern,
            "regex": self.pattern.regex,
            "path_glob": self.pattern.path_glob,
            "files_matching": self.files_matching,
            "grep_p50_ms": round(grep_p50, 1),
            "grep_p95_ms": round(percentile(self.grep_ms, 0.95), 1),
            "grep_timeouts": self.grep_timeouts,
            "runs": len(self.grep_ms),
            "matches": None if self.grep_timeouts == len(self.grep_ms) else self.matches,
            "truncated": self.truncated,
            "custom_p50_ms": round(custom_p50, 1),
            "custom_p95_ms": round(percentile(self.custom_ms, 0.95), 1),
            "seq_p50_ms": round(seq_p50, 1),
            "seq_p95_ms": round(percentile(self.seq_ms, 0.95), 1),
            "statement_runs": len(self.seq_ms),
            "seq_over_grep": round(ratio(seq_p50, grep_p50), 2),
            "seq_over_custom": round(ratio(seq_p50, custom_p50), 2),
            "index_used_explain": uses_index(self.plan_index),
            "access_explain": file_contents_access(self.plan_index),
            "explain_ms": execution_ms(self.plan_index),
            "index_used_grep": uses_index(self.plan_grep) if self.plan_grep else None,
            "access_grep": file_contents_access(self.plan_grep) if self.plan_grep else None,
            "grep_plan_ms": execution_ms(self.plan_grep),
            "seq_explain_ms": execution_ms(self.plan_seq),
            "access_seq": file_contents_access(self.plan_seq),
        }


async def auto_explain(conn: asyncpg.Connection) -> bool:
    """Loads auto_explain into this session, off; False when the server refuses."""
    try:
        await conn.execute("LOAD 'auto_explain'")
        await conn.execute("SET auto_explain.log_min_duration = -1")
        await conn.execute("SET auto_explain.log_level = notice")
        await conn.execute("SET auto_explain.log_analyze = on")
        await conn.execute("SET auto_explain.log_buffers = on")
    except asyncpg.PostgresError as err:
        print(f"auto_explain unavailable ({err}); grep()'s own plans not shown", file=sys.stderr)
        return False
    return True


async def plan_of_grep(conn: asyncpg.Connection, sql: str, args: Sequence[Any]) -> list[str]:
    """The plan grep()'s statement runs with on this connection, with actual rows and times
    (auto_explain). The same text is the same prepared statement in asyncpg's cache, so the
    same plan as grep() gets (its planning setting included); run without grep's deadline,
    so a statement grep() gives up on shows its plan and full time too."""
    notices: list[str] = []

    def listen(_: Any, message: Any) -> None:
        notices.append(str(getattr(message, "message", message)))

    conn.add_log_listener(listen)
    try:
        async with conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {BASELINE_TIMEOUT_MS}")
            await conn.execute("SET LOCAL auto_explain.log_min_duration = 0")
            await conn.execute(reading.GREP_PLANNING)  # as grep() plans it
            await conn.fetch(sql, *args, timeout=BASELINE_TIMEOUT_MS / 1000)
    finally:
        conn.remove_log_listener(listen)
    for notice in notices:
        if "regexp_split_to_table" in notice:
            return auto_explain_plan(notice.splitlines())
    return []


def auto_explain_plan(lines: Sequence[str]) -> list[str]:
    """An auto_explain message ('duration: X ms  plan:', 'Query Text: <the statement>',
    the plan) as 'Execution Time: X ms' and the plan."""
    duration = re.match(r"\s*duration: ([\d.]+) ms", lines[0]) if lines else None
    for i, line in enumerate(lines):
        if re.match(r"(Limit|Sort|Incremental Sort|Gather|Nested Loop)\b", line):
            return [*lines[i:], *([f"Execution Time: {duration.group(1)} ms"] if duration else [])]
    return list(lines)


async def prime(conn: asyncpg.Connection) -> None:
    """Runs both grep statements (literal, regex) PRIME times on this connection."""
    viewer = Viewer(PRINCIPAL, False)
    for regex in (False, True):
        for _ in range(PRIME):
            await reading.grep(
                conn,
                viewer,
                repo=SLUG,
                pattern="getaddrinfo",
                regex=regex,
                path_glob="",
                limit=None,
            )


async def explain(
    conn: asyncpg.Connection, sql: str, args: Sequence[Any], *, index: bool
) -> list[str]:
    async with conn.transaction(readonly=True):
        await _settings(conn, index=index)
        rows = await conn.fetch(
            "EXPLAIN (ANALYZE, BUFFERS) " + sql, *args, timeout=BASELINE_TIMEOUT_MS / 1000
        )
    return [r[0] for r in rows]


async def _settings(conn: asyncpg.Connection, *, index: bool) -> None:
    await conn.execute(f"SET LOCAL statement_timeout = {BASELINE_TIMEOUT_MS}")
    # Planned for these parameters, whatever was cached for earlier ones; a cached plan
    # would also ignore the enable_* settings below.
    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    if not index:
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        await conn.execute("SET LOCAL enable_indexscan = off")


async def measure(
    conn: asyncpg.Connection,
    p: Pattern,
    files_matching: int,
    *,
    runs: int,
    statement_runs: int,
    explained: bool,
) -> Measured:
    viewer = Viewer(PRINCIPAL, False)
    out = Measured(p, files_matching)

    async def call() -> reading.GrepResult | None:
        try:
            return await reading.grep(
                conn,
                viewer,
                repo=SLUG,
                pattern=p.pattern,
                regex=p.regex,
                path_glob=p.path_glob,
                limit=None,
            )
        except DeadlineExceeded:
            return None

    await call()  # warm-up: the text's pages in the cache, the statement prepared
    for _ in range(runs):
        started = time.perf_counter()
        result = await call()
        out.grep_ms.append((time.perf_counter() - started) * 1000)
        if result is None:
            out.grep_timeouts += 1
        else:
            out.matches, out.truncated = len(result.matches), result.truncated

    sql, args = reading.grep_statement(
        viewer,
        repo=SLUG,
        pattern=p.pattern,
        regex=p.regex,
        path_glob=p.path_glob,
        rows=limits.GREP_LIMIT_DEFAULT + 1,
    )
    if explained:
        out.plan_grep = await plan_of_grep(conn, sql, args)
    # Statements of their own (a comment changes the text), so neither reuses a plan made
    # for the other or for grep().
    custom_sql = "/* bench.grep: planned for the pattern */" + sql
    seq_sql = "/* bench.grep: no index */" + sql
    out.plan_index = await explain(conn, custom_sql, args, index=True)
    out.custom_ms = await timed(conn, custom_sql, args, index=True, runs=statement_runs)
    out.plan_seq = await explain(conn, seq_sql, args, index=False)
    out.seq_ms = await timed(conn, seq_sql, args, index=False, runs=statement_runs)
    return out


async def timed(
    conn: asyncpg.Connection, sql: str, args: Sequence[Any], *, index: bool, runs: int
) -> list[float]:
    """Milliseconds per run of the statement (its transaction and settings included)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        async with conn.transaction(readonly=True):
            await _settings(conn, index=index)
            await conn.fetch(sql, *args, timeout=BASELINE_TIMEOUT_MS / 1000)
        times.append((time.perf_counter() - started) * 1000)
    return times


# ---------------------------------------------------------------- report


def _matches(r: dict[str, Any], *, short: bool = False) -> str:
    if r["matches"] is None:
        return "-" if short else "- (timed out)"
    if r["truncated"]:
        return f"{r['matches']}+" if short else f"{r['matches']} (truncated)"
    return str(r["matches"])


def _grep_plan(r: dict[str, Any]) -> str:
    if not r["access_grep"]:
        return "n/a"
    ms = r.get("grep_plan_ms")
    return r["access_grep"] + ("" if ms is None else f", {ms:.0f}")


def table(rows: list[dict[str, Any]]) -> str:
    """The patterns x figures table, markdown."""
    lines = [
        "| pattern | files with a match | grep() p50 / p95 ms | matches "
        "| grep()'s plan, its ms without the deadline "
        "| planned for the pattern: p50 ms, plan | index disabled: p50 ms | seq / grep() "
        "| seq / planned |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        text = r["text"].replace("|", "\\|")
        where = f" in `{r['path_glob']}`" if r["path_glob"] else ""
        kind = "regex" if r["regex"] else "literal"
        timeouts = f" ({r['grep_timeouts']}/{r['runs']} timed out)" if r["grep_timeouts"] else ""
        lines.append(
            f"| {r['pattern']}: `{text}`{where} ({kind}) | {r['files_matching']:,} "
            f"| {r['grep_p50_ms']:.1f} / {r['grep_p95_ms']:.1f}{timeouts} "
            f"| {_matches(r)} | {_grep_plan(r)} "
            f"| {r['custom_p50_ms']:.1f}, {r['access_explain']} | {r['seq_p50_ms']:.1f} "
            f"| {r['seq_over_grep']:.2f}x | {r['seq_over_custom']:.2f}x |"
        )
    return "\n".join(lines)


def markdown(report: dict[str, Any], measured: list[Measured]) -> str:
    corpus = report["corpus"]
    settings = ", ".join(f"{k} {v}" for k, v in report["settings"].items())
    parts = [
        "# Grep on a large repository",
        "",
        f"{corpus['files']:,} files ({corpus['languages']}), {corpus['lines']:,} lines, "
        f"{corpus['text_mb']} MB of text; trigram index {corpus['trgm_index_mb']} MB, built in "
        f"{corpus['index_build_s']} s. {report['machine']}; {report['server']} ({settings}).",
        "",
        f"grep(): {report['runs']} runs per pattern after a warm-up call, on a connection that "
        f"had run each grep statement {PRIME} times first; the statement planned for the "
        f"pattern and with the index disabled: {report['statement_runs']} runs each. "
        f"Grep's deadline: {report['grep_timeout_ms']} ms.",
        "",
        table(report["patterns"]),
        "",
    ]
    for m in measured:
        parts += [
            f"## {m.pattern.name}: `{m.pattern.pattern}`"
            + (f" in `{m.pattern.path_glob}`" if m.pattern.path_glob else ""),
            "",
        ]
        if m.plan_grep:
            parts += ["grep()'s own last run (auto_explain):", "", "```", *m.plan_grep, "```", ""]
        parts += [
            "EXPLAIN (ANALYZE, BUFFERS), planned for the pattern:",
            "",
            "```",
            *m.plan_index,
            "```",
            "",
            "With the index disabled:",
            "",
            "```",
            *m.plan_seq,
            "```",
            "",
        ]
    return "\n".join(parts)


def print_table(report: dict[str, Any]) -> None:
    header = (
        f"{'pattern':<24}{'files':>7}{'grep p50':>10}{'p95':>9}{'match':>6}  "
        f"{'grep() plan, ms':<25}{'planned':>9}  {'its plan':<16}{'no index':>10}"
        f"{'seq/grep':>9}{'seq/plan':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in report["patterns"]:
        print(
            f"{r['pattern']:<24}{r['files_matching']:>7}{r['grep_p50_ms']:>10.1f}"
            f"{r['grep_p95_ms']:>9.1f}{_matches(r, short=True):>6}  "
            f"{_grep_plan(r):<25}{r['custom_p50_ms']:>9.1f}  "
            f"{r['access_explain']:<16}{r['seq_p50_ms']:>10.1f}"
            f"{r['seq_over_grep']:>8.2f}x{r['seq_over_custom']:>8.2f}x"
            + (f"  ({r['grep_timeouts']} timed out)" if r["grep_timeouts"] else "")
        )
    print("(+: truncated at the limit)")
    sys.stdout.flush()


# ---------------------------------------------------------------- run


async def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[Measured]]:
    root = Path(sysconfig.get_paths()["purelib"])
    started = time.perf_counter()
    texts = await asyncio.to_thread(collect, root, args.files)
    counts = {p.name: sum(1 for t in texts if file_matches(p, t.path, t.content)) for p in PATTERNS}
    print(f"read {len(texts):,} files ({time.perf_counter() - started:.1f} s)", flush=True)
    report: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python "
        f"{platform.python_version()}",
        "runs": args.runs,
        "statement_runs": args.statement_runs,
        "grep_timeout_ms": reading.GREP_TIMEOUT_MS,
    }
    async with scratch_database("bench_grep", keep=args.keep) as url:
        await migrate(url, "retrieval", MIGRATIONS)
        conn = await asyncpg.connect(url)
        try:
            report["corpus"] = await load(conn, texts)
            settings = await conn.fetch(
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])",
                [
                    "shared_buffers",
                    "work_mem",
                    "effective_cache_size",
                    "max_parallel_workers_per_gather",
                    "jit",
                    "default_toast_compression",
                    "random_page_cost",
                ],
            )
            version = await conn.fetchval("SHOW server_version")
        finally:
            await conn.close()
        report["server"] = f"PostgreSQL {version}" + (
            " (embedded)" if not os.environ.get("COGRAPH_DATABASE_URL") else ""
        )
        report["settings"] = {r["name"]: f"{r['setting']}{r['unit'] or ''}" for r in settings}
        del texts
        c = report["corpus"]
        print(
            f"loaded {c['files']:,} files, {c['lines']:,} lines, {c['text_mb']} MB of text "
            f"in {c['load_s']} s; {INDEX} ({c['trgm_index_mb']} MB) built in "
            f"{c['index_build_s']} s; {report['server']}",
            flush=True,
        )
        # One connection made as the service makes its pool's (deadlines, statement cache).
        pool = await create_pool(url, min_size=1, max_size=1, timeouts=DbTimeouts.from_env())
        measured = []
        try:
            async with pool.acquire() as conn:
                explained = await auto_explain(conn)
                await prime(conn)
                for p in PATTERNS:
                    m = await measure(
                        conn,
                        p,
                        counts[p.name],
                        runs=args.runs,
                        statement_runs=args.statement_runs,
                        explained=explained,
                    )
                    measured.append(m)
                    r = m.row()
                    print(
                        f"{p.name}: grep p50 {r['grep_p50_ms']:.1f} ms, seq scan p50 "
                        f"{r['seq_p50_ms']:.1f} ms, EXPLAIN: {r['access_explain']}, "
                        f"grep() ran: {r['access_grep']}",
                        flush=True,
                    )
        finally:
            await pool.close()
    report["patterns"] = [m.row() for m in measured]
    report["plans"] = {
        m.pattern.name: {"explain": m.plan_index, "grep": m.plan_grep, "seq": m.plan_seq}
        for m in measured
    }
    return report, measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=20_000, help="files in the repository")
    parser.add_argument("--runs", type=int, default=7, help="timed grep() calls per pattern")
    parser.add_argument(
        "--statement-runs",
        type=int,
        default=3,
        help="timed runs of the statement planned for the pattern, and without the index",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/out/grep"))
    parser.add_argument("--quiet", action="store_true", help="do not print the plans")
    parser.add_argument("--keep", action="store_true", help="keep the database (external only)")
    args = parser.parse_args()
    report, measured = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(report, measured)
    (args.out / "grep.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "grep.md").write_text(text)
    if not args.quiet:
        for m in measured:
            print(f"\n{m.pattern.name} ({asdict(m.pattern)}):")
            print("\n".join(m.plan_index))
    print()
    print_table(report)
    print(f"\nwrote {args.out / 'grep.md'} and {args.out / 'grep.json'}")


if __name__ == "__main__":
    main()

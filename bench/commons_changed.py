"""How far a note whose code changed under it sinks in commons search.

A board of notes in a few topics, each topic's notes written alike (one lesson phrased many
ways, embedded by the packaged model in-process), no votes. Each note's anchors are drawn at
random (seeded): all fresh, all changed (body_changed, signature_changed or orphaned), moved,
or none. Each topic's own query then ranks the whole board through the service's exact SQL
(commons.store) once per weight of changed anchors (SEARCH_W_CHANGED_ANCHORS; 0 is the
blend without the penalty), in the same run and on the same vectors; the figures are the
mean rank of each kind of note among its topic's notes, the share of changed notes in each
query's top 10, and the share of a query's changed notes ranked below a note about another
lesson (which the penalty should not cause: a changed note is still about the query).

    .venv/bin/python -m bench.commons_changed                  # 20 topics x 30 notes
    .venv/bin/python -m bench.commons_changed --per-topic 50 --weights 0,0.05,0.1,0.2

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.databases import postgres_server
from bench.embedder import CACHE
from commons.app import MIGRATIONS
from commons.ranking import CHANGED_STATUSES, RankingWeights, Strategy
from commons.store import CommonsStore, SearchParams
from embedder.backends import load_backend
from svckit.db import DbTimeouts, create_database, create_pool, drop_database
from svckit.embedded import cancelled_by_sigterm
from svckit.migrations import migrate

# One lesson per topic; its notes say it in different words (as agents do).
TOPICS = [
    "billing retries a declined charge twice, so the gateway call must be idempotent",
    "the config loader reads YAML before environment variables, which override it",
    "HTTP headers are parsed case-insensitively by the request reader",
    "the worker pool drops jobs silently when its queue is full",
    "database migrations must never rename a column in one step",
    "the cache key includes the tenant id, or tenants see each other's data",
    "timeouts in the client are per attempt, not for the whole call",
    "log lines must not contain the API key, redact it in the formatter",
    "the scheduler runs jobs in UTC, not in the server's local time zone",
    "file uploads are streamed to disk, never held in memory",
    "the search index is rebuilt nightly, so new documents appear the next day",
    "feature flags are read once at start-up; changing them needs a restart",
    "the payment webhook can arrive before the order is committed",
    "user emails are compared lower-cased, the unique index is on lower(email)",
    "the rate limiter counts per key, not per IP address",
    "retries back off exponentially with jitter, capped at thirty seconds",
    "the PDF renderer needs fonts installed in the container image",
    "session cookies are signed with a key rotated every month",
    "the export job writes CSV with a BOM so spreadsheets open it as UTF-8",
    "the message queue delivers at least once; handlers must deduplicate",
]
FRAMES = [
    "{t}.",
    "Note: {t}.",
    "Learned the hard way: {t}.",
    "Pitfall: {t}.",
    "Remember that {t}.",
    "Heads up, {t}.",
    "Convention: {t}.",
    "Before you change this: {t}.",
    "Confirmed today: {t}.",
    "Gotcha: {t}.",
]
DETAILS = [
    "",
    " Found while debugging a production incident.",
    " The tests do not catch it.",
    " See the module docstring for the history.",
    " It cost us a day.",
    " Reviewers keep missing it.",
]
KINDS = ("fresh", "changed", "moved", "unanchored")
KIND_SHARES = (0.4, 0.4, 0.1, 0.1)


def notes(per_topic: int, rng: np.random.Generator) -> list[tuple[int, str, str]]:
    """(topic, title, body) for every note: the topic's lesson framed and detailed."""
    out = []
    for topic, lesson in enumerate(TOPICS):
        for i in range(per_topic):
            frame = FRAMES[i % len(FRAMES)]
            detail = DETAILS[int(rng.integers(0, len(DETAILS)))]
            text = frame.format(t=lesson)
            out.append((topic, text[:120], f"{text}{detail} (note {i})"))
    return out


async def load(
    url: str, board: list[tuple[int, str, str]], vectors: np.ndarray, kinds: list[str], seed: int
) -> list[uuid.UUID]:
    """Stores the notes with their vectors and anchors (one or two per anchored note)."""
    rng = np.random.default_rng(seed)
    conn = await asyncpg.connect(url)
    try:
        await register_vector(conn)
        author = await conn.fetchval(
            "INSERT INTO users (principal_id) VALUES ('bench') RETURNING id"
        )
        ids = [uuid.uuid4() for _ in board]
        # One creation time for all: ties go to the id, never to the newer note.
        await conn.executemany(
            "INSERT INTO posts (id, author_id, title, body, embedding, created_at) "
            "VALUES ($1, $2, $3, $4, $5, '2025-01-01')",
            [(i, author, t, b, v) for i, (_, t, b), v in zip(ids, board, vectors, strict=True)],
        )
        anchors = []
        for post_id, kind in zip(ids, kinds, strict=True):
            if kind == "unanchored":
                continue
            for n in range(1 + int(rng.integers(0, 2))):
                if kind == "changed":
                    status = CHANGED_STATUSES[int(rng.integers(0, len(CHANGED_STATUSES)))]
                else:
                    status = kind
                moved = "src/moved.py" if status == "moved" else None
                anchors.append((post_id, status, f"src/m{n}.py", moved))
        await conn.executemany(
            "INSERT INTO post_anchors (post_id, repository_id, repo, qualified_name, path, "
            "start_line, end_line, kind, signature_hash, body_hash, commit_sha, generation, "
            "status, checked_commit, checked_generation, moved_path, moved_qualified_name, "
            "moved_start_line, moved_end_line) VALUES ($1, 1, 'example.com/acme/app', "
            "'m.f', $3, 1, 9, 'function', 's', 'b', 'c0', 1, $2, 'c1', 2, $4, "
            "CASE WHEN $4::text IS NULL THEN NULL ELSE 'moved.f' END, "
            "CASE WHEN $4::text IS NULL THEN NULL ELSE 1 END, "
            "CASE WHEN $4::text IS NULL THEN NULL ELSE 9 END)",
            anchors,
        )
        await conn.execute("VACUUM ANALYZE posts")
        await conn.execute("VACUUM ANALYZE post_anchors")
        return ids
    finally:
        await conn.close()


async def measure(args: argparse.Namespace, url: str) -> None:
    rng = np.random.default_rng(args.seed)
    board = notes(args.per_topic, rng)
    kinds = [str(k) for k in rng.choice(KINDS, size=len(board), p=KIND_SHARES)]
    backend = load_backend("onnx-int8", None, CACHE)
    print(f"embedding {len(board)} notes and {len(TOPICS)} queries", file=sys.stderr)
    vectors = backend.encode([f"{t}\n\n{b}" for _, t, b in board], 32)
    # The query: the lesson asked as a question an agent would type.
    queries = backend.encode([f"why {lesson}" for lesson in TOPICS], 32)
    ids = await load(url, board, vectors, kinds, args.seed)
    topic_of = {i: board[n][0] for n, i in enumerate(ids)}
    kind_of = dict(zip(ids, kinds, strict=True))
    pool = await create_pool(url, max_size=2, timeouts=DbTimeouts.from_env().for_indexing())
    store = CommonsStore(pool)
    weights = [float(w) for w in args.weights.split(",")]
    rows = []
    try:
        for weight in weights:
            ranks: dict[str, list[int]] = defaultdict(list)
            top10_changed: list[float] = []
            buried: list[float] = []
            for topic, vector in enumerate(queries):
                hits = await store.search(
                    SearchParams(
                        vector=np.asarray(vector, dtype=np.float32),
                        patterns=[],
                        limit=len(board),
                        snippet=10,
                        weights=RankingWeights(changed_anchors=weight),
                        strategy=Strategy.EXACT,
                        k=0,
                    )
                )
                own = [h.id for h in hits if topic_of[h.id] == topic]
                for rank, post_id in enumerate(own, 1):
                    ranks[kind_of[post_id]].append(rank)
                top = [kind_of[h.id] for h in hits[:10]]
                top10_changed.append(top.count("changed") / len(top))
                # A changed note still about the query, ranked below a note about another
                # lesson: what the penalty must not do.
                first_other = next(n for n, h in enumerate(hits) if topic_of[h.id] != topic)
                changed = [
                    n
                    for n, h in enumerate(hits)
                    if topic_of[h.id] == topic and kind_of[h.id] == "changed"
                ]
                buried.append(sum(n > first_other for n in changed) / max(len(changed), 1))
            rows.append((weight, ranks, statistics.mean(top10_changed), statistics.mean(buried)))
    finally:
        await pool.close()
    count = {k: kinds.count(k) for k in KINDS}
    print(
        f"\ncommons changed anchors: {len(TOPICS)} topics x {args.per_topic} notes "
        f"({', '.join(f'{count[k]} {k}' for k in KINDS)}), no votes; ranks among the "
        f"query's {args.per_topic} topic notes (1 = best; {(args.per_topic + 1) / 2:.1f} is "
        "the middle)\n"
    )
    header = (
        f"{'w_changed':>9} {'fresh':>7} {'changed':>8} {'moved':>7} {'unanch.':>8} "
        f"{'changed - fresh':>16} {'changed in top 10':>18} {'below off-topic':>16}"
    )
    print(header)
    print("-" * len(header))
    for weight, ranks, top10, below in rows:
        mean = {k: statistics.mean(ranks[k]) if ranks[k] else float("nan") for k in KINDS}
        print(
            f"{weight:>9.2f} {mean['fresh']:>7.1f} {mean['changed']:>8.1f} {mean['moved']:>7.1f} "
            f"{mean['unanchored']:>8.1f} {mean['changed'] - mean['fresh']:>+16.1f} "
            f"{top10:>17.0%} {below:>15.0%}"
        )
    sys.stdout.flush()


async def run(args: argparse.Namespace) -> None:
    with (
        cancelled_by_sigterm(),
        tempfile.TemporaryDirectory(prefix="commons-changed-") as tmp,
        postgres_server(Path(tmp)) as base,
    ):
        database = f"commons_changed_{uuid.uuid4().hex[:8]}"
        url = await create_database(base, database)
        try:
            await migrate(url, "commons", MIGRATIONS)
            await measure(args, url)
        finally:
            await drop_database(base, database)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-topic", type=int, default=30, help="notes per topic")
    parser.add_argument(
        "--weights",
        default=f"0,0.05,{RankingWeights().changed_anchors:g},0.2",
        help="SEARCH_W_CHANGED_ANCHORS values, comma-separated (0: no penalty)",
    )
    parser.add_argument("--seed", type=int, default=7)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

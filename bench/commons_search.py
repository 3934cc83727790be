"""Commons search: exact scan vs two-stage retrieval, latency and recall@10.

Builds a synthetic board (clustered random unit vectors, so a query has a neighbourhood of
genuinely similar notes as real embeddings do, plus a skewed vote distribution), loads it
with COPY, builds the HNSW index, then runs the same query vectors through the service's own
exact and two-stage SQL (commons.store). Times exclude query embedding, as in the issue.

    .venv/bin/python -m bench.commons_search --notes 100000
    COGRAPH_DATABASE_URL=postgresql://... .venv/bin/python -m bench.commons_search --notes 1000000

Run it as a module from the repository root (as a script, sibling files in bench/ such as
embedder.py would shadow the service packages). Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np
import numpy.typing as npt

from commons.app import MIGRATIONS
from commons.query import like_pattern
from commons.ranking import RankingWeights, Strategy
from commons.store import CommonsStore, SearchParams, configure_two_stage, search_args, search_sql
from svckit.db import create_pool, database_url, ensure_extensions
from svckit.embedded import EmbeddedPostgres
from svckit.migrations import migrate

DIM = 384
TOPICS = 20  # titles carry "topic<n>", so a quoted phrase keeps about 1/TOPICS of the notes


def unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def synthetic_notes(
    n: int, clusters: int, spread: float, rng: np.random.Generator, chunk: int
) -> Iterator[list[tuple[object, ...]]]:
    """Rows for COPY, chunk by chunk: each note sits near one of `clusters` centroids.

    The centroids are the generator's first draw, so `queries` (seeded alike) finds them.
    """
    centroids = unit(rng.standard_normal((clusters, DIM)))
    now = datetime.now(UTC)
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        which = rng.integers(0, clusters, size)
        noise = rng.standard_normal((size, DIM)) * (spread / np.sqrt(DIM))
        vectors = unit(centroids[which] + noise)
        # Most notes have no votes, a few are popular, some are downvoted.
        scores = np.where(rng.random(size) < 0.4, rng.geometric(0.25, size) - 1, 0)
        scores = np.where(rng.random(size) < 0.05, -rng.integers(1, 6, size), scores)
        ages = rng.random(size) * 365 * 86_400
        yield [
            (
                uuid.UUID(bytes=rng.bytes(16), version=4),
                f"note {start + i} about topic{int(which[i]) % TOPICS}",
                f"synthetic body {start + i}",
                [f"t{int(which[i]) % 50}"],
                int(scores[i]),
                now - timedelta(seconds=float(ages[i])),
                vectors[i],
            )
            for i in range(size)
        ]


async def load(url: str, n: int, clusters: int, spread: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    conn = await asyncpg.connect(url)
    try:
        from pgvector.asyncpg import register_vector

        await register_vector(conn)
        author = await conn.fetchval(
            "INSERT INTO users (principal_id) VALUES ('bench') RETURNING id"
        )
        # Loading into an indexed table would insert into the HNSW graph row by row.
        await conn.execute("DROP INDEX posts_embedding_hnsw")
        start = time.perf_counter()
        for rows in synthetic_notes(n, clusters, spread, rng, chunk=20_000):
            await conn.copy_records_to_table(
                "posts",
                records=[(r[0], author, *r[1:]) for r in rows],
                columns=[
                    "id",
                    "author_id",
                    "title",
                    "body",
                    "tags",
                    "score",
                    "created_at",
                    "embedding",
                ],
            )
        print(f"loaded {n} notes in {time.perf_counter() - start:.1f}s", file=sys.stderr)
        start = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '2GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 2")
        await conn.execute(
            "CREATE INDEX posts_embedding_hnsw ON posts USING hnsw (embedding vector_cosine_ops)"
        )
        print(f"built HNSW in {time.perf_counter() - start:.1f}s", file=sys.stderr)
        await conn.execute("VACUUM ANALYZE posts")
    finally:
        await conn.close()


def queries(
    count: int, clusters: int, spread: float, seed: int
) -> list[tuple[npt.NDArray[np.float32], int]]:
    """Query vectors near random centroids (same generator, so the same centroids)."""
    rng = np.random.default_rng(seed)
    centroids = unit(rng.standard_normal((clusters, DIM)))
    qrng = np.random.default_rng(seed + 1)
    which = qrng.integers(0, clusters, count)
    noise = qrng.standard_normal((count, DIM)) * (spread / np.sqrt(DIM))
    vectors = unit(centroids[which] + noise)
    return [(vectors[i], int(which[i])) for i in range(count)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> None:
    base = os.environ.get("COGRAPH_DATABASE_URL")
    embedded: EmbeddedPostgres | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if base is None:
        tmp = tempfile.TemporaryDirectory(prefix="commons-bench-")
        embedded = EmbeddedPostgres(Path(tmp.name) / "data")
        base = embedded.start()
    database = f"commons_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(base)
    await admin.execute(f'CREATE DATABASE "{database}"')
    await admin.close()
    url = database_url(base, database)
    clusters = args.clusters or max(10, args.notes // 100)
    ks = sorted(int(k) for k in str(args.k).split(","))
    try:
        await ensure_extensions(url)
        await migrate(url, "commons", MIGRATIONS)
        await load(url, args.notes, clusters, args.spread, args.seed)
        pool = await create_pool(url, max_size=2)
        store = CommonsStore(pool)
        weights = RankingWeights()
        workload = queries(args.queries, clusters, args.spread, args.seed)

        def params(
            vector: npt.NDArray[np.float32], strategy: Strategy, phrase: str | None, k: int = 0
        ) -> SearchParams:
            return SearchParams(
                vector=vector,
                patterns=[like_pattern(phrase)] if phrase else [],
                limit=10,
                snippet=1200,
                weights=weights,
                strategy=strategy,
                k=k or ks[-1],
            )

        if args.explain:
            vector = workload[0][0]
            async with pool.acquire() as conn, conn.transaction():
                await configure_two_stage(conn, ks[-1], filtered=False)
                p = params(vector, Strategy.TWO_STAGE, None)
                plan = await conn.fetch(
                    "EXPLAIN (ANALYZE, BUFFERS) " + search_sql(p.strategy, False), *search_args(p)
                )
            print("\n".join(r[0] for r in plan), file=sys.stderr)

        rows: list[tuple[str, list[float], float | None]] = []
        for label, phrase_of in (
            ("unfiltered", lambda c: None),
            ('with a "topic" phrase', lambda c: f"topic{c % TOPICS}"),
        ):
            # Warm the caches for both paths before timing.
            for vector, cluster in workload[:10]:
                for strategy in (Strategy.EXACT, Strategy.TWO_STAGE):
                    await store.search(params(vector, strategy, phrase_of(cluster)))
            exact_times: list[float] = []
            stage_times: dict[int, list[float]] = {k: [] for k in ks}
            recalls: dict[int, list[float]] = {k: [] for k in ks}
            for vector, cluster in workload:
                phrase = phrase_of(cluster)
                start = time.perf_counter()
                exact = [h.id for h in await store.search(params(vector, Strategy.EXACT, phrase))]
                exact_times.append((time.perf_counter() - start) * 1000)
                for k in ks:
                    start = time.perf_counter()
                    hits = await store.search(params(vector, Strategy.TWO_STAGE, phrase, k))
                    stage_times[k].append((time.perf_counter() - start) * 1000)
                    if exact:
                        found = set(exact) & {h.id for h in hits}
                        recalls[k].append(len(found) / len(exact))
            rows.append((f"exact, {label}", exact_times, None))
            for k in ks:
                rows.append(
                    (f"two-stage K={k}, {label}", stage_times[k], statistics.mean(recalls[k]))
                )
        await pool.close()

        print(
            f"\ncommons search: {args.notes:,} notes, {clusters:,} clusters, "
            f"{args.queries} queries, top-10, query embedding excluded\n"
        )
        header = f"{'strategy':<44} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'recall@10':>10}"
        print(header)
        print("-" * len(header))
        for name, times, recall in rows:
            print(
                f"{name:<44} {pct(times, 0.5):>8.2f} {pct(times, 0.95):>8.2f} "
                f"{statistics.mean(times):>8.2f} "
                f"{'' if recall is None else f'{recall:.3f}':>10}"
            )
        group = len(ks) + 1
        for i in range(0, len(rows), group):
            for name, times, _ in rows[i + 1 : i + group]:
                ratio = pct(rows[i][1], 0.5) / pct(times, 0.5)
                print(f"p50 exact / {name}: {ratio:.1f}x")
    finally:
        if not args.keep:
            admin = await asyncpg.connect(base)
            await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            await admin.close()
        if embedded is not None:
            embedded.stop()
        if tmp is not None:
            tmp.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=100_000, help="board size (issue: 1M)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--k", default="100,200,400", help="two-stage candidate counts, comma-separated"
    )
    parser.add_argument("--clusters", type=int, default=0, help="default notes/100")
    parser.add_argument("--spread", type=float, default=0.8, help="noise around centroids")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--explain", action="store_true", help="print the two-stage plan")
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Commons benchmarks: search (exact scan vs two-stage) at several board sizes, and posting.

search: for each board size, a synthetic board (clustered random unit vectors, so a query
has a neighbourhood of genuinely similar notes as real embeddings do, plus a skewed vote
distribution) is loaded with COPY and HNSW-indexed; the same query vectors then run through
the service's own exact and two-stage SQL (commons.store). Times exclude query embedding, as
in the issue; recall@10 is the two-stage top-10 against the exact top-10.

post: a real embedder process and a real commons process; concurrent callers post notes over
gRPC. The figures are the request latency and posts/s (the vector is written off the request
path), the time until every note is searchable, and, as the baseline measured in the same
run, what each post would cost if it waited for its embedding.

    .venv/bin/python -m bench.commons search --notes 10000,100000,1000000
    .venv/bin/python -m bench.commons post --posts 2000 --callers 16
    .venv/bin/python -m bench.commons            # both, at 10k and 100k notes

Run it as a module from the repository root (as a script, sibling files in bench/ such as
embedder.py would shadow the service packages). Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory. The 1M-note board took 15 minutes on two
cores (1 minute to load, 9.5 to build the HNSW index, the rest in exact scans).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np
import numpy.typing as npt

from bench.corpus import code_chunks
from bench.databases import postgres_server
from bench.embedder import CACHE
from bench.internal_auth import signed_channel, with_secret
from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from commons.app import MIGRATIONS
from commons.board import run_search
from commons.embedding import embedding_text
from commons.models import SearchHit
from commons.query import like_pattern
from commons.ranking import RankingWeights, Strategy
from commons.store import CommonsStore, SearchParams, configure_two_stage, search_args, search_sql
from svckit.db import DbTimeouts, create_database, create_pool, drop_database
from svckit.embedded import cancelled_by_sigterm
from svckit.migrations import migrate
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER

DIM = 384
WARMUP = 32  # posts and embeds before timing
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
        # Loading into an indexed table would insert into the indexes row by row.
        await conn.execute("DROP INDEX posts_embedding_hnsw")
        await conn.execute("DROP INDEX posts_haystack_trgm")
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
        start = time.perf_counter()
        await conn.execute(
            "CREATE INDEX posts_haystack_trgm ON posts "
            "USING gin (commons_haystack(title, body, tags) gin_trgm_ops)"
        )
        print(f"built the phrase index in {time.perf_counter() - start:.1f}s", file=sys.stderr)
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


@dataclass
class Row:
    name: str
    times: list[float]
    recall: float | None


async def search_size(
    base: str, notes: int, args: argparse.Namespace, ks: list[int]
) -> tuple[int, list[Row]]:
    """Builds a board of `notes` in its own database and times both strategies on it."""
    database = f"commons_bench_{uuid.uuid4().hex[:8]}"
    url = await create_database(base, database)
    clusters = args.clusters or max(10, notes // 100)
    try:
        await migrate(url, "commons", MIGRATIONS)
        await load(url, notes, clusters, args.spread, args.seed)
        # A full scan of a million notes is what some strategies measure: no request budget.
        pool = await create_pool(url, max_size=2, timeouts=DbTimeouts.from_env().for_indexing())
        try:
            rows = await time_strategies(
                pool, args, ks, queries(args.queries, clusters, args.spread, args.seed), notes
            )
        finally:
            await pool.close()
    finally:
        if not args.keep:
            await drop_database(base, database)
    return clusters, rows


async def time_strategies(
    pool: asyncpg.Pool,
    args: argparse.Namespace,
    ks: list[int],
    workload: list[tuple[npt.NDArray[np.float32], int]],
    notes: int,
) -> list[Row]:
    store = CommonsStore(pool)
    weights = RankingWeights()

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
                "EXPLAIN (ANALYZE, BUFFERS) " + search_sql(p.strategy, 0), *search_args(p)
            )
        print("\n".join(r[0] for r in plan), file=sys.stderr)

    Search = Callable[[npt.NDArray[np.float32], str | None], Awaitable[list[SearchHit]]]

    def plain(strategy: Strategy, k: int = 0) -> Search:
        async def go(vector: npt.NDArray[np.float32], phrase: str | None) -> list[SearchHit]:
            return await store.search(params(vector, strategy, phrase, k))

        return go

    async def board(vector: npt.NDArray[np.float32], phrase: str | None) -> list[SearchHit]:
        # What the board does above its two-stage threshold: probe a phrase's selectivity,
        # then the filtered scan or two-stage (with its fallback).
        _, hits = await run_search(
            store, params(vector, Strategy.TWO_STAGE, phrase), args.filter_first_max
        )
        return hits

    stage = [(f"two-stage K={k}", plain(Strategy.TWO_STAGE, k)) for k in ks]
    phrase_paths = [*stage, ("filtered", plain(Strategy.FILTERED)), ("board", board)]
    rng = np.random.default_rng(args.seed + 2)
    rare = {i: f"note {int(rng.integers(0, notes))} about" for i in range(len(workload))}
    rows: list[Row] = []
    for label, phrase_of, paths in (
        ("unfiltered", lambda i, c: None, stage),
        ('"topic" phrase (1/20 of notes)', lambda i, c: f"topic{c % TOPICS}", phrase_paths),
        ("rare phrase (1 note)", lambda i, c: rare[i], phrase_paths),
    ):
        candidates = [("exact", plain(Strategy.EXACT)), *paths]
        # Warm the caches for every path before timing.
        for i, (vector, cluster) in enumerate(workload[:10]):
            for _, search in candidates:
                await search(vector, phrase_of(i, cluster))
        times: dict[str, list[float]] = {name: [] for name, _ in candidates}
        recalls: dict[str, list[float]] = {name: [] for name, _ in candidates}
        for i, (vector, cluster) in enumerate(workload):
            phrase = phrase_of(i, cluster)
            exact: set[uuid.UUID] = set()
            for name, search in candidates:
                start = time.perf_counter()
                hits = await search(vector, phrase)
                times[name].append((time.perf_counter() - start) * 1000)
                found = {h.id for h in hits}
                if name == "exact":
                    exact = found
                elif exact:
                    recalls[name].append(len(found & exact) / len(exact))
        for name, _ in candidates:
            recall = statistics.mean(recalls[name]) if recalls[name] else None
            rows.append(Row(f"{name}, {label}", times[name], recall))
    return rows


def print_search(notes: int, clusters: int, count: int, rows: list[Row]) -> None:
    print(
        f"\ncommons search: {notes:,} notes, {clusters:,} clusters, "
        f"{count} queries, top-10, query embedding excluded\n"
    )
    header = f"{'strategy':<52} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'recall@10':>10}"
    print(header)
    print("-" * len(header))
    for row in rows:
        recall = "" if row.recall is None else f"{row.recall:.3f}"
        print(
            f"{row.name:<52} {pct(row.times, 0.5):>8.2f} {pct(row.times, 0.95):>8.2f} "
            f"{statistics.mean(row.times):>8.2f} {recall:>10}"
        )
    exact = rows[0]
    for row in rows:
        if row.name.startswith("exact"):
            exact = row
            continue
        print(f"p50 exact / {row.name}: {pct(exact.times, 0.5) / pct(row.times, 0.5):.1f}x")
    sys.stdout.flush()


async def search_benchmark(base: str, args: argparse.Namespace) -> None:
    ks = sorted(int(k) for k in str(args.k).split(","))
    for notes in sorted(int(n) for n in str(args.notes).split(",")):
        clusters, rows = await search_size(base, notes, args, ks)
        print_search(notes, clusters, args.queries, rows)


# --- posting ---------------------------------------------------------------------------------


def note_texts(count: int, seed: int) -> list[tuple[str, str]]:
    """(title, body) pairs: a real source excerpt as the body, its first line as the title."""
    chunks = code_chunks(count, chars=800, seed=seed)
    return [
        (f"note {i}: {chunk.strip().splitlines()[0][:120] or 'code'}", chunk)
        for i, chunk in enumerate(chunks)
    ]


def start_process(module: str, env: dict[str, str], ready: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", module], env=with_secret({**os.environ, **env})
    )
    deadline = time.monotonic() + 180
    while not ready.exists() or not ready.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{module} did not start")
        time.sleep(0.1)
    return process


async def concurrently(
    callers: int, items: list[tuple[str, str]], call: Callable[[tuple[str, str]], Awaitable[None]]
) -> tuple[list[float], float]:
    """Runs `call` over items from `callers` concurrent loops; latencies (ms) and wall (s)."""
    queue = list(reversed(items))
    latencies: list[float] = []

    async def loop() -> None:
        while queue:
            item = queue.pop()
            start = time.perf_counter()
            await call(item)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(callers)))
    return latencies, time.perf_counter() - start


async def all_embedded(url: str) -> None:
    """Returns once no note lacks its vector (polled: the writes happen in another process)."""
    conn = await asyncpg.connect(url)
    try:
        pending = True
        while pending:
            pending = await conn.fetchval(
                "SELECT EXISTS (SELECT FROM posts WHERE embedding IS NULL)"
            )
            await asyncio.sleep(0.05 if pending else 0)
    finally:
        await conn.close()


async def post_figures(base: str, args: argparse.Namespace, workdir: Path) -> None:
    database = f"commons_post_{uuid.uuid4().hex[:8]}"
    url = await create_database(base, database)
    embedder_ready, commons_ready = workdir / "embedder.port", workdir / "commons.port"
    quiet = {"COGRAPH_LOG_LEVEL": "WARNING"}
    embedder = start_process(
        "embedder",
        {
            **quiet,
            "EMBEDDER_LISTEN": "127.0.0.1:0",
            "EMBEDDER_READY_FILE": str(embedder_ready),
            "EMBEDDER_CACHE_DIR": str(CACHE),
        },
        embedder_ready,
    )
    embedder_addr = f"127.0.0.1:{embedder_ready.read_text().strip()}"
    commons: subprocess.Popen[bytes] | None = None
    try:
        commons = start_process(
            "commons",
            {
                **quiet,
                "COMMONS_LISTEN": "127.0.0.1:0",
                "COMMONS_READY_FILE": str(commons_ready),
                "COGRAPH_DATABASE_URL": url,
                "EMBEDDER_ADDR": embedder_addr,
                "COMMONS_BACKFILL_INTERVAL_S": "1",
            },
            commons_ready,
        )
        notes = note_texts(args.posts + 2 * WARMUP, args.seed)
        warm, baseline, posted = (
            notes[:WARMUP],
            notes[WARMUP : 2 * WARMUP],
            notes[2 * WARMUP :],
        )
        metadata = ((PRINCIPAL_HEADER, "bench"), (ADMIN_HEADER, "0"))
        async with (
            signed_channel(f"127.0.0.1:{commons_ready.read_text().strip()}") as cc,
            signed_channel(embedder_addr) as ec,
        ):
            stub = commons_pb2_grpc.CommonsServiceStub(cc)
            embed = embedder_pb2_grpc.EmbedderServiceStub(ec)

            async def post(note: tuple[str, str]) -> None:
                await stub.CreatePost(
                    commons_pb2.CreatePostRequest(title=note[0], body=note[1], tags=["bench"]),
                    metadata=metadata,
                    timeout=60,
                )

            async def embed_one(note: tuple[str, str]) -> None:
                await embed.Embed(
                    embedder_pb2.EmbedRequest(texts=[embedding_text(*note)]), timeout=60
                )

            await concurrently(args.callers, warm, post)
            await all_embedded(url)
            # Baseline: the wait a post would add if it embedded on the request path.
            embed_lat, embed_wall = await concurrently(args.callers, baseline + warm, embed_one)
            start = time.perf_counter()
            post_lat, post_wall = await concurrently(args.callers, posted, post)
            await all_embedded(url)
            searchable_wall = time.perf_counter() - start
    finally:
        for process in (commons, embedder):
            if process is not None:
                process.terminate()
                process.wait(30)
        await drop_database(base, database)

    embeds = len(baseline) + len(warm)
    print(
        f"\ncommons posting: {len(posted)} notes of ~800 chars over gRPC, "
        f"{args.callers} concurrent callers, {os.cpu_count()} cores\n"
    )
    header = f"{'':<46} {'per s':>8} {'p50 ms':>8} {'p95 ms':>8}"
    print(header)
    print("-" * len(header))
    print(
        f"{'CreatePost (vector written off the path)':<46} {len(posted) / post_wall:>8.1f} "
        f"{pct(post_lat, 0.5):>8.2f} {pct(post_lat, 0.95):>8.2f}"
    )
    print(
        f"{'baseline: embedding one note (Embed)':<46} {embeds / embed_wall:>8.1f} "
        f"{pct(embed_lat, 0.5):>8.2f} {pct(embed_lat, 0.95):>8.2f}"
    )
    print(
        f"{'all posted notes searchable':<46} {len(posted) / searchable_wall:>8.1f} "
        f"{'':>8} {'':>8}   ({searchable_wall:.1f} s after the first post)"
    )
    print(
        f"posts/s / embeds/s: {(len(posted) / post_wall) / (embeds / embed_wall):.1f}x; "
        f"embed p50 / post p50: {pct(embed_lat, 0.5) / pct(post_lat, 0.5):.1f}x"
    )
    sys.stdout.flush()


async def run(args: argparse.Namespace) -> None:
    with (
        cancelled_by_sigterm(),  # a killed run still stops its server
        tempfile.TemporaryDirectory(prefix="commons-bench-") as tmp,
        postgres_server(Path(tmp)) as base,
    ):
        if args.mode in ("search", "all"):
            await search_benchmark(base, args)
        if args.mode in ("post", "all"):
            await post_figures(base, args, Path(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("search", "post", "all"), default="all")
    parser.add_argument(
        "--notes", default="10000,100000", help="board sizes, comma-separated (issue: 1000000)"
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--k", default="100,200,400", help="two-stage candidate counts, comma-separated"
    )
    parser.add_argument("--clusters", type=int, default=0, help="default notes/100")
    parser.add_argument("--spread", type=float, default=0.8, help="noise around centroids")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--explain", action="store_true", help="print the two-stage plan")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    parser.add_argument("--posts", type=int, default=1000, help="notes posted (post mode)")
    parser.add_argument("--callers", type=int, default=16, help="concurrent posters")
    parser.add_argument(
        "--filter-first-max",
        type=int,
        default=20_000,
        help="the board's COMMONS_FILTER_FIRST_MAX, for the board row",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Source-routing latency: p50/p95 of Route at 100, 1,000 and 10,000 repositories.

Builds a synthetic corpus shaped like retrieval's router tables: each repository gets a
slug, a branch, README words and up to 1500 module-level qualified names and file paths
derived from the Python modules installed in this environment (renamed under the
repository's own package, so, as in real code, most qualified names are unique to their
repository). 200 collections get descriptions, headings and english-indexed chunks. 70% of
the sources are public; the benchmark routes as a principal with grants on some private ones,
so the ACL is exercised. Rows go in with COPY; the pool of repositories grows in place
(100 -> 1,000 -> 10,000) and each size is measured in process (Router.route, i.e. tokenising,
both pools, scoring) and over gRPC (a real RouterService on 127.0.0.1:0).

Three in-process figures per size, in the same run: "uncached", the baseline, routes through
RouterStore (every route derives N, df and the top sources in SQL, as ROUTER_CACHE_TERMS=0
does); "cached" is the service as configured by default (CachedRouterStore, warm: the route
only checks that nothing changed); "cold" forgets the cache before every route, i.e. the
first route after any change to the pool, which reads the pool's sources, the principal's
readable set and every term's matches. gRPC is the service as configured.

    .venv/bin/python -m bench.route                       # 100, 1000, 10000
    .venv/bin/python -m bench.route --sizes 100 1000 --iterations 300

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import random
import statistics
import sysconfig
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.databases import scratch_database
from bench.internal_auth import signed_channel, with_secret
from cograph.router.v1 import router_pb2, router_pb2_grpc
from cograph_api.access_rules import Viewer
from router.app import MIGRATIONS, RouterApp, start_router
from router.cache import CachedRouterStore
from router.routing import Router
from router.settings import RouterSettings
from router.store import RouterStore
from svckit.config import Env
from svckit.migrations import migrate

REPO_ROOT = Path(__file__).resolve().parent.parent
RETRIEVAL_MIGRATIONS = REPO_ROOT / "services" / "retrieval" / "migrations"
CORPUS_CAP = 1500  # qualified names + paths per repository, as the indexer caps it
PRINCIPAL = "bench-user"

# A fixed mix: natural-language questions, identifiers in three spellings, a label, a typo.
QUERIES = (
    "how does the http client retry a request",
    "parse_config",
    "ParseConfig",
    "tokenizer.encode_batch",
    "where is the session pool configured",
    "sqlalchemy engine dialect",
    "confgi loadre",  # typos: df 0, weigh nothing
    "websocket protocol handshake",
    "json schema validation errors",
    "cuda kernel launch",
    "grpc server interceptor",
    "numpy array broadcasting",
)
_ENGLISH_TEXT = (
    "the service handles requests and retries failed calls with backoff while the worker "
    "pool schedules jobs reads configuration files validates input parses documents stores "
    "results in the database caches responses exports metrics and logs errors for operators "
    "who deploy it on kubernetes with helm charts terraform modules and docker images"
)
ENGLISH = _ENGLISH_TEXT.split()


Rows = list[tuple[object, ...]]


@dataclass
class Batch:
    repositories: Rows
    terms: Rows
    grants: Rows


@dataclass(frozen=True)
class Vocabulary:
    modules: dict[str, list[str]]  # top-level package -> module paths below it ("a/b")
    words: list[str]  # identifier parts and English words, for READMEs and prose


def load_vocabulary() -> Vocabulary:
    root = Path(sysconfig.get_paths()["purelib"])
    modules: dict[str, list[str]] = {}
    words: set[str] = set(ENGLISH)
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        parts = rel.parts
        if len(parts) < 2 or not all(p.isidentifier() for p in parts):
            continue
        modules.setdefault(parts[0], []).append("/".join(parts[1:]))
        words.update(p.strip("_").lower() for p in parts if len(p.strip("_")) > 2)
    return Vocabulary({k: sorted(v) for k, v in sorted(modules.items())}, sorted(words))


def _corpus_size(rng: random.Random) -> int:
    # Log-normal: most repositories are small, a few reach the cap (median ~150 entries).
    return max(5, min(CORPUS_CAP, round(rng.lognormvariate(math.log(150), 1.0))))


def repository_rows(vocab: Vocabulary, start: int, stop: int, seed: int) -> Iterator[Batch]:
    """(repositories, terms, grants) rows for ids start..stop-1, in batches of 500."""
    rng = random.Random(seed + start)
    packages = list(vocab.modules)
    batch = Batch([], [], [])
    for rid in range(start, stop):
        owner = rng.choice(vocab.words)
        base = rng.choice(packages)
        name = f"{base.strip('_').lower()}-{rng.choice(vocab.words)}-{rid}"
        slug = f"github.com/{owner}/{name}"
        public = rng.random() < 0.7
        batch.repositories.append((rid, slug, "main", slug, "git", public))
        terms: set[tuple[str, str]] = {("label", slug), ("label", "github.com")}
        terms |= {("label", owner), ("label", name), ("branch", "main")}
        terms |= {("readme", w) for w in rng.sample(vocab.words, rng.randint(20, 150))}
        package = name.replace("-", "_")
        pool = vocab.modules[base] + vocab.modules[rng.choice(packages)]
        chosen = rng.sample(pool, min(len(pool), _corpus_size(rng) // 2 + 1))
        for module in chosen:
            terms.add(("qualified_name", f"{package}.{module.replace('/', '.')}".lower()))
            terms.add(("path", f"src/{package}/{module}.py".lower()))
        batch.terms.extend((rid, source, term) for source, term in terms)
        if not public and rng.random() < 0.3:
            batch.grants.append((PRINCIPAL, rid))
        if len(batch.repositories) >= 500:
            yield batch
            batch = Batch([], [], [])
    if batch.repositories:
        yield batch


def collection_rows(vocab: Vocabulary, count: int, seed: int) -> tuple[Rows, Rows, Rows, Rows]:
    rng = random.Random(seed)
    collections: Rows = []
    terms: Rows = []
    chunks: Rows = []
    grants: Rows = []
    for cid in range(1, count + 1):
        name = f"{rng.choice(vocab.words)}-{rng.choice(ENGLISH)}-notes-{cid}"
        public = rng.random() < 0.7
        description = rng.sample(vocab.words, 12)
        collections.append((cid, name, " ".join(description), public))
        entries = {("label", name), *(("description", w) for w in description)}
        for d in range(rng.randint(3, 40)):
            heading = " ".join(rng.sample(vocab.words, 3))
            entries |= {("heading", heading), ("path", f"docs/{name}/{d}.md")}
            body = " ".join(rng.choice(ENGLISH + vocab.words) for _ in range(120))
            chunks.append((cid, f"docs/{name}/{d}.md", 1, 20, body, "h"))
        terms.extend((cid, source, term) for source, term in entries)
        if not public and rng.random() < 0.3:
            grants.append((PRINCIPAL, cid))
    return collections, terms, chunks, grants


async def load_repositories(
    conn: asyncpg.Connection, vocab: Vocabulary, start: int, stop: int
) -> int:
    rows = 0
    for batch in repository_rows(vocab, start, stop, seed=11):
        await conn.copy_records_to_table(
            "repositories",
            records=batch.repositories,
            columns=["id", "slug", "branch", "source", "source_kind", "public"],
        )
        await conn.copy_records_to_table(
            "repository_terms", records=batch.terms, columns=["repository_id", "source", "term"]
        )
        await conn.copy_records_to_table(
            "grants", records=batch.grants, columns=["principal_id", "repository_id"]
        )
        rows += len(batch.terms)
    await conn.execute("ANALYZE repositories; ANALYZE repository_terms; ANALYZE grants")
    return rows


async def load_collections(conn: asyncpg.Connection, vocab: Vocabulary, count: int) -> None:
    collections, terms, chunks, grants = collection_rows(vocab, count, seed=23)
    await conn.copy_records_to_table(
        "collections", records=collections, columns=["id", "name", "description", "public"]
    )
    await conn.copy_records_to_table(
        "collection_terms", records=terms, columns=["collection_id", "source", "term"]
    )
    # tsv is computed by the server, so chunks go in with INSERT rather than COPY.
    await conn.executemany(
        "INSERT INTO md_collection_chunks (collection_id, path, start_line, end_line, body, "
        "content_hash, tsv) VALUES ($1, $2, $3, $4, $5, $6, to_tsvector('english', $5))",
        chunks,
    )
    await conn.copy_records_to_table(
        "grants", records=grants, columns=["principal_id", "collection_id"]
    )
    await conn.execute(
        "ANALYZE collections; ANALYZE collection_terms; ANALYZE md_collection_chunks"
    )


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """p50, p95 and the minimum: on a shared machine the minimum shows the unloaded cost."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return statistics.median(ordered), p95, ordered[0]


async def measure(
    call: Callable[[str], Awaitable[object]], iterations: int
) -> tuple[float, float, float]:
    for query in QUERIES:  # warm: plans cached, pages in shared buffers
        await call(query)
    samples = []
    for i in range(iterations):
        query = QUERIES[i % len(QUERIES)]
        start = time.perf_counter()
        await call(query)
        samples.append((time.perf_counter() - start) * 1000)
    return percentiles(samples)


async def run(url: str, sizes: list[int], collections: int, iterations: int) -> None:
    await migrate(url, "retrieval", RETRIEVAL_MIGRATIONS)
    await migrate(url, "router", MIGRATIONS)
    vocab = load_vocabulary()
    print(f"vocabulary: {len(vocab.modules)} packages, {len(vocab.words)} words")
    conn = await asyncpg.connect(url)
    await load_collections(conn, vocab, collections)
    settings = RouterSettings.from_env(
        Env(with_secret({"ROUTER_LISTEN": "127.0.0.1:0", "ROUTER_DATABASE_URL": url}))
    )
    app: RouterApp = await start_router(settings)
    viewer = Viewer(PRINCIPAL, False)
    channel = signed_channel(f"127.0.0.1:{app.port}")
    stub = router_pb2_grpc.RouterServiceStub(channel)
    metadata = (("x-cograph-principal", PRINCIPAL), ("x-cograph-admin", "0"))

    if settings.cache is None:
        raise SystemExit("the benchmark measures the cache: unset ROUTER_CACHE_TERMS=0")
    uncached_router = Router(RouterStore(app.pool), settings.limits)
    cold_store = CachedRouterStore(app.pool, settings.cache)
    cold_router = Router(cold_store, settings.limits)

    async def uncached(query: str) -> object:
        return await uncached_router.route(query, viewer=viewer)

    async def in_process(query: str) -> object:
        return await app.router.route(query, viewer=viewer)

    async def cold(query: str) -> object:
        cold_store.clear()
        return await cold_router.route(query, viewer=viewer)

    async def over_grpc(query: str) -> object:
        return await stub.Route(router_pb2.RouteRequest(query=query), metadata=metadata)

    results: list[Result] = []
    loaded = 0
    try:
        for size in sizes:
            started = time.perf_counter()
            await load_repositories(conn, vocab, loaded + 1, size + 1)
            loaded = size
            rows = await conn.fetchval("SELECT count(*) FROM repository_terms")
            print(
                f"loaded {size} repositories ({rows} term rows) in "
                f"{time.perf_counter() - started:.1f}s"
            )
            before = await measure(uncached, iterations)
            local = await measure(in_process, iterations)
            first = await measure(cold, iterations)
            remote = await measure(over_grpc, iterations)
            results.append(Result(size, rows, before, local, first, remote, os.getloadavg()[0]))
    finally:
        await channel.close(None)
        await app.stop()
        await conn.close()

    print(f"\n{collections} collections; {len(QUERIES)} queries x {iterations} iterations; ms")
    print("(load: the machine's 1-minute load average when the size was measured)")
    print(
        f"{'repos':>7} {'term rows':>10} {'uncached p50':>12} {'p95':>7} "
        f"{'cached p50':>10} {'p95':>7} {'min':>6} {'cold p50':>9} {'p95':>7} "
        f"{'grpc p50':>9} {'grpc p95':>9} {'grpc min':>9} {'load':>5}"
    )
    for r in results:
        print(
            f"{r.size:>7} {r.rows:>10} {r.before[0]:>12.2f} {r.before[1]:>7.2f} "
            f"{r.local[0]:>10.2f} {r.local[1]:>7.2f} {r.local[2]:>6.2f} "
            f"{r.cold[0]:>9.2f} {r.cold[1]:>7.2f} "
            f"{r.remote[0]:>9.2f} {r.remote[1]:>9.2f} {r.remote[2]:>9.2f} {r.load:>5.1f}"
        )
    for r in results:
        print(f"{r.size} repositories: cached p50 is {r.before[0] / r.local[0]:.1f}x faster")
    for a, b in itertools.pairwise(results):
        print(
            f"growth {a.size} -> {b.size} repositories ({b.size / a.size:.0f}x): "
            f"uncached p50 x{b.before[0] / a.before[0]:.2f}, "
            f"cached p50 x{b.local[0] / a.local[0]:.2f}, grpc p50 x{b.remote[0] / a.remote[0]:.2f}"
        )


@dataclass(frozen=True)
class Result:
    size: int
    rows: int
    before: tuple[float, float, float]  # in process, uncached (RouterStore): p50, p95, min
    local: tuple[float, float, float]  # in process, cached and warm
    cold: tuple[float, float, float]  # in process, the cache forgotten before each route
    remote: tuple[float, float, float]  # over gRPC, as served
    load: float


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--collections", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=240)
    args = parser.parse_args()
    async with scratch_database("bench_route") as url:
        await run(url, sorted(args.sizes), args.collections, args.iterations)


if __name__ == "__main__":
    asyncio.run(main())

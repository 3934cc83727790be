"""What a code vector costs on disk and what it finds, stored three ways, at several sizes.

For each size N the same N 384-dimension vectors (all-MiniLM-L6-v2 embeddings of `--real`
code nodes from site-packages, as bench.search collects them; the rest noisy copies of
them, which keep the clustered shape of real embeddings) are stored and indexed as:

  * `vector`   float32 `vector(384)`, HNSW `vector_cosine_ops` (what Cograph stores today);
  * `halfvec`  float16 `halfvec(384)`, HNSW `halfvec_cosine_ops`;
  * `binary`   `binary_quantize(...)::bit(384)` with HNSW `bit_hamming_ops`, the float32
               column kept beside it (without its own index) to re-score: the index finds
               `--rescore` candidates by Hamming distance, the float vectors order them.

Printed per variant: the table's and the index's bytes, vectors per GB (table + index),
the HNSW build time, and for `--queries` query vectors (real embeddings of node
summaries, the shape of a question in words) recall@10 against the exact top 10 computed
in numpy over the same float32 vectors (the baseline, outside the database) and the p50
and p95 of one query's time (ef_search 100, as the vector stream runs). Each size gets a
fresh database.

    .venv/bin/python -m bench.vector_storage --sizes 10000 50000
    .venv/bin/python -m bench.vector_storage --sizes 10000 100000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.databases import scratch_database
from bench.internal_auth import signed_channel
from bench.search import DIM, collect_corpus, embed_all, embedder, near_copies, pct
from cograph_api.embedder_client import EmbedderClient

EF_SEARCH = 100
TOP = 10

VARIANTS: dict[str, dict[str, str]] = {
    "vector": {
        "column": "embedding vector(384)",
        "index": "USING hnsw (embedding vector_cosine_ops)",
        "query": "SELECT id FROM items ORDER BY embedding <=> $1::vector LIMIT {top}",
    },
    "halfvec": {
        "column": "embedding halfvec(384)",
        "index": "USING hnsw (embedding halfvec_cosine_ops)",
        "query": "SELECT id FROM items ORDER BY embedding <=> $1::vector::halfvec(384) LIMIT {top}",
    },
    "binary": {
        "column": "embedding vector(384), code bit(384)",
        "index": "USING hnsw (code bit_hamming_ops)",
        # The index's Hamming order picks candidates; the float vectors order them.
        "query": (
            "SELECT id FROM (SELECT id, embedding FROM items"
            " ORDER BY code <~> binary_quantize($1::vector)::bit(384) LIMIT {rescore}) c"
            " ORDER BY embedding <=> $1::vector LIMIT {top}"
        ),
    },
}


async def load_variant(conn: asyncpg.Connection, name: str, vectors: np.ndarray) -> None:
    spec = VARIANTS[name]
    await conn.execute("DROP TABLE IF EXISTS items")
    await conn.execute(f"CREATE TABLE items (id integer PRIMARY KEY, {spec['column']})")
    rows = [(i, v) for i, v in enumerate(vectors)]
    if name == "halfvec":
        await conn.execute("CREATE TEMP TABLE staged (id integer, embedding vector(384))")
        await conn.copy_records_to_table("staged", records=rows)
        await conn.execute("INSERT INTO items SELECT id, embedding::halfvec(384) FROM staged")
        await conn.execute("DROP TABLE staged")
    elif name == "binary":
        await conn.execute("CREATE TEMP TABLE staged (id integer, embedding vector(384))")
        await conn.copy_records_to_table("staged", records=rows)
        await conn.execute(
            "INSERT INTO items SELECT id, embedding, binary_quantize(embedding)::bit(384)"
            " FROM staged"
        )
        await conn.execute("DROP TABLE staged")
    else:
        await conn.copy_records_to_table("items", records=rows)
    await conn.execute("VACUUM ANALYZE items")


async def measure(
    conn: asyncpg.Connection,
    name: str,
    vectors: np.ndarray,
    queries: np.ndarray,
    truth: list[set[int]],
    *,
    rescore: int,
    maintenance_mb: int,
) -> dict[str, Any]:
    await load_variant(conn, name, vectors)
    start = time.perf_counter()
    # pgvector builds in memory up to maintenance_work_mem, then much more slowly.
    await conn.execute(f"SET maintenance_work_mem = '{maintenance_mb}MB'")
    await conn.execute(f"CREATE INDEX items_hnsw ON items {VARIANTS[name]['index']}")
    build_s = time.perf_counter() - start
    table = int(await conn.fetchval("SELECT pg_table_size('items')"))
    index = int(await conn.fetchval("SELECT pg_relation_size('items_hnsw')"))
    sql = VARIANTS[name]["query"].format(top=TOP, rescore=rescore)
    await conn.execute(f"SET hnsw.ef_search = {max(EF_SEARCH, rescore)}")
    await conn.execute("SET hnsw.iterative_scan = relaxed_order")
    for query in queries[:5]:  # warm the cache
        await conn.fetch(sql, query)
    times, recalls = [], []
    for query, expected in zip(queries, truth, strict=True):
        start = time.perf_counter()
        found = {row["id"] for row in await conn.fetch(sql, query)}
        times.append((time.perf_counter() - start) * 1000)
        recalls.append(len(found & expected) / TOP)
    return {
        "table_bytes": table,
        "index_bytes": index,
        "vectors_per_gb": round(len(vectors) / ((table + index) / 1e9)),
        "build_s": round(build_s, 2),
        "recall_at_10": round(float(np.mean(recalls)), 4),
        "p50_ms": round(pct(times, 0.5), 2),
        "p95_ms": round(pct(times, 0.95), 2),
    }


def exact_top(vectors: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """The baseline: exact cosine top 10 (unit vectors: the largest dot products)."""
    scores = queries @ vectors.T
    top = np.argpartition(-scores, TOP, axis=1)[:, :TOP]
    return [set(int(i) for i in row) for row in top]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    largest = max(args.sizes)
    rng = np.random.default_rng(args.seed)
    nodes, _docs = await collect_corpus(
        min(largest, args.real * 4), 0, args.real, "spread", args.seed
    )
    async with embedder() as app:
        channel = signed_channel(f"127.0.0.1:{app.port}")
        client = EmbedderClient(channel, timeout_s=300)
        try:
            real = await embed_all(
                client, [f"{n.qualified_name}\n{n.signature}\n{n.body}" for n in nodes[: args.real]]
            )
            sample = nodes[: args.real][:: max(1, args.real // args.queries)][: args.queries]
            queries = await embed_all(client, [n.summary or n.qualified_name for n in sample])
        finally:
            await channel.close(None)
    vectors_all = np.concatenate([real, near_copies(rng, real, largest - len(real))])
    report: dict[str, Any] = {"real": len(real), "queries": len(queries), "sizes": {}}
    for size in sorted(args.sizes):
        vectors = vectors_all[:size]
        truth = exact_top(vectors, queries)
        async with scratch_database("bench_vstore") as url:
            conn = await asyncpg.connect(url)
            await register_vector(conn)
            try:
                report["sizes"][str(size)] = {
                    name: await measure(
                        conn,
                        name,
                        vectors,
                        queries,
                        truth,
                        rescore=args.rescore,
                        maintenance_mb=args.maintenance_mb,
                    )
                    for name in VARIANTS
                }
            finally:
                await conn.close()
        print_size(size, report["sizes"][str(size)])
    return report


def print_size(size: int, figures: dict[str, dict[str, Any]]) -> None:
    print(f"\n{size:,} vectors of {DIM} dimensions")
    print(
        f"{'variant':<9} {'table MB':>9} {'index MB':>9} {'vectors/GB':>11} {'build s':>8}"
        f" {'recall@10':>9} {'p50 ms':>7} {'p95 ms':>7}"
    )
    for name, row in figures.items():
        print(
            f"{name:<9} {row['table_bytes'] / 1e6:>9.1f} {row['index_bytes'] / 1e6:>9.1f}"
            f" {row['vectors_per_gb']:>11,} {row['build_s']:>8.1f} {row['recall_at_10']:>9.3f}"
            f" {row['p50_ms']:>7.2f} {row['p95_ms']:>7.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--real", type=int, default=3000, help="vectors embedded for real")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rescore", type=int, default=100, help="binary: candidates re-scored")
    parser.add_argument(
        "--maintenance-mb", type=int, default=2048, help="maintenance_work_mem for the builds"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    report = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""Searches on a streaming replica while the primary takes writes (issue 34).

bench.search's index (N code nodes, real embeddings for a sample, filler for the rest) is
loaded into an embedded PostgreSQL (the primary); a hot standby is made from it with
`pg_basebackup` (bench/standby.py) and streams its WAL. Two retrieval servers run in this
process against the same data: one with every request on the primary, one with
COGRAPH_DATABASE_READ_URL naming the standby. `--clients` concurrent clients search
(bench.search's symbol, signature and prose questions, as a non-admin principal) for
`--seconds` in each phase:

  1. primary, idle;
  2. primary, while a writer process inserts batches of 384-dimension vectors into an
     HNSW-indexed table on the primary (what an index job's publication costs the
     database: index upkeep and WAL, without the embedder's CPU);
  3. replica, the same writes going on (the standby replays them).

Printed per phase: searches/s, p50 and p95, which server answered (served_by), and the
writer's rows/s. On one machine the standby shares the cores with the primary and the
services, so the figures show where the reads go and what replay costs a search, not the
capacity a second machine adds (docs/scaling.md says what that is).

    .venv/bin/python -m bench.replicas --nodes 20000 --clients 8 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.internal_auth import signed_channel
from bench.search import (
    METADATA,
    collect_corpus,
    corpus_vectors,
    embedder,
    load,
    make_queries,
    pct,
    retrieval_server,
)
from bench.standby import streaming_replica
from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.embedder_client import EmbedderClient
from retrieval.app import MIGRATIONS
from svckit.db import create_database
from svckit.embedded import EmbeddedPostgres, cancelled_by_sigterm
from svckit.migrations import migrate

WRITE_BATCH = 200


def _writer(url: str, stop: Any, counter: Any) -> None:
    """The write load, in a process of its own: batches of unit vectors into an
    HNSW-indexed table, committed one batch at a time, until `stop` is set."""

    async def write() -> None:
        conn = await asyncpg.connect(url)
        await register_vector(conn)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_writes (id bigserial PRIMARY KEY,"
            " embedding vector(384))"
        )
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS bench_writes_hnsw ON bench_writes"
            " USING hnsw (embedding vector_cosine_ops)"
        )
        rng = np.random.default_rng(11)
        while not stop.is_set():
            batch = rng.standard_normal((WRITE_BATCH, 384)).astype(np.float32)
            batch /= np.linalg.norm(batch, axis=1, keepdims=True)
            await conn.copy_records_to_table(
                "bench_writes", records=[(v,) for v in batch], columns=["embedding"]
            )
            with counter.get_lock():
                counter.value += WRITE_BATCH
        await conn.close()

    asyncio.run(write())


async def _phase(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    texts: list[str],
    *,
    clients: int,
    seconds: float,
) -> dict[str, Any]:
    latencies: list[float] = []
    servers: Counter[str] = Counter()
    errors = 0
    deadline = time.monotonic() + seconds

    async def client(offset: int) -> None:
        nonlocal errors
        turn = offset
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                reply = await stub.Search(
                    pb.SearchRequest(query=texts[turn % len(texts)]),
                    metadata=tuple(METADATA),
                    timeout=60,
                )
            except Exception:
                errors += 1
                continue
            finally:
                turn += clients
            latencies.append((time.perf_counter() - started) * 1000)
            servers[reply.served_by or "primary"] += 1

    started = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(clients)))
    wall = time.monotonic() - started
    return {
        "searches_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(pct(latencies, 0.5), 1),
        "p95_ms": round(pct(latencies, 0.95), 1),
        "searches": len(latencies),
        "errors": errors,
        "served_by": dict(servers),
    }


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"nodes": args.nodes, "clients": args.clients}
    primary = EmbeddedPostgres(work / "primary")
    server_url = primary.start()
    try:
        db_url = await create_database(server_url, "bench_replicas")
        await migrate(db_url, "retrieval", MIGRATIONS)
        nodes, docs = await collect_corpus(args.nodes, args.docs, args.real, "spread", args.seed)
        async with embedder() as embedder_app:
            embedder_addr = f"127.0.0.1:{embedder_app.port}"
            channel = signed_channel(embedder_addr)
            try:
                vectors = await corpus_vectors(
                    EmbedderClient(channel, timeout_s=60.0),
                    nodes,
                    docs,
                    real=args.real,
                    filler="near",
                    rng=np.random.default_rng(args.seed),
                )
            finally:
                await channel.close(None)
            conn = await asyncpg.connect(db_url)
            try:
                await register_vector(conn)
                await load(
                    conn,
                    nodes,
                    docs,
                    node_vectors=vectors.nodes,
                    summary_vectors=vectors.summaries,
                    doc_vectors=vectors.docs,
                    seed=args.seed,
                )
            finally:
                await conn.close()
            texts = [q.text for q in make_queries(nodes, vectors.real, args.queries, args.seed)]
            print(f"loaded {len(nodes)} nodes; {len(texts)} questions", flush=True)
            with streaming_replica(primary, work / "standby") as standby:
                replica_env = {"COGRAPH_DATABASE_READ_URL": standby.url("bench_replicas")}
                async with (
                    retrieval_server(db_url, work / "a", embedder_addr, True) as (_, on_primary),
                    retrieval_server(
                        db_url, work / "b", embedder_addr, True, extra_env=replica_env
                    ) as (replica_app, on_replica),
                ):
                    assert replica_app.reads is not None
                    await replica_app.reads.check()
                    # Warm both servers' pools and caches.
                    for stub in (on_primary, on_replica):
                        await _phase(stub, texts, clients=2, seconds=3)
                    phases: dict[str, dict[str, Any]] = {}
                    phases["primary, idle"] = await _phase(
                        on_primary, texts, clients=args.clients, seconds=args.seconds
                    )
                    for name, stub in (
                        ("primary, primary writing", on_primary),
                        ("replica, primary writing", on_replica),
                    ):
                        # Spawned: a forked child would inherit gRPC's and asyncio's state.
                        spawn = multiprocessing.get_context("spawn")
                        stop = spawn.Event()
                        written = spawn.Value("q", 0)
                        writer = spawn.Process(target=_writer, args=(db_url, stop, written))
                        writer.start()
                        await asyncio.sleep(2)  # its table and index exist, it is writing
                        before = written.value
                        started = time.monotonic()
                        phases[name] = await _phase(
                            stub, texts, clients=args.clients, seconds=args.seconds
                        )
                        rows = written.value - before
                        phases[name]["writes_per_s"] = round(rows / (time.monotonic() - started))
                        stop.set()
                        writer.join(timeout=30)
                    report["phases"] = phases
    finally:
        primary.stop()
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"\n{report['nodes']:,} nodes, {report['clients']} clients")
    print(
        f"{'phase':<26} {'searches/s':>10} {'p50 ms':>7} {'p95 ms':>7} {'errors':>6}"
        f" {'rows/s written':>14}  served by"
    )
    for name, row in report["phases"].items():
        print(
            f"{name:<26} {row['searches_per_s']:>10} {row['p50_ms']:>7} {row['p95_ms']:>7}"
            f" {row['errors']:>6} {row.get('writes_per_s', 0):>14}  {row['served_by']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--docs", type=int, default=2_000)
    parser.add_argument("--real", type=int, default=1_500)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    async def go(work: Path) -> dict[str, Any]:
        with cancelled_by_sigterm():
            return await run(args, work)

    with tempfile.TemporaryDirectory(prefix="cograph-replicas-") as work:
        # The servers run as their own user when this runs as root: they must reach it.
        Path(work).chmod(0o755)
        report = asyncio.run(go(Path(work)))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""Publication with notes anchored to the code, and the commons' re-check of those anchors.

One repository of --nodes code nodes (--nodes-per-file a file; the embeddings are
bench.search's random filler vectors) is published as generation 1 in a retrieval
database. Each round rewrites --changed of its files as the next generation (every node
copied, half of those files with another body) and times its publication: the service's
own statements (indexing.generations.publish_rows, then index_store.finish_repository, one
transaction), as a real index run ends: --rounds publications while the commons holds no
anchors, then --anchors anchored notes (one anchor each, on nodes of the repository) are
stored and --rounds more are timed, in the same run. Then the commons' staleness check
(commons.anchor_watch, over gRPC to a real retrieval server, as the commons' own
principal) compares every anchor with the newest generation, and its time is reported with
what it found.

    .venv/bin/python -m bench.anchors                       # 100,000 nodes, 10,000 anchors
    .venv/bin/python -m bench.anchors --nodes 20000 --anchors 10000 --rounds 3

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.databases import postgres_server
from bench.internal_auth import signed_channel, with_secret
from bench.search import HEAVY_INDEXES, random_unit
from cograph.retrieval.v1 import retrieval_pb2_grpc
from commons.anchor_watch import AnchorWatch
from commons.app import MIGRATIONS as COMMONS_MIGRATIONS
from retrieval.anchors import body_hash, signature_hash
from retrieval.app import MIGRATIONS as RETRIEVAL_MIGRATIONS
from retrieval.app import start_retrieval
from retrieval.indexing import generations, index_store
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from svckit.db import DbTimeouts, create_database, create_pool
from svckit.embedded import cancelled_by_sigterm
from svckit.migrations import migrate

SLUG = "bench.example/acme/big"
DIM = 384


def node_text(file: int, i: int, generation: int, edited: bool) -> tuple[str, str, str]:
    """(qualified name, signature, body) of node i of file `file`; an edited body differs."""
    name = f"func_{i}"
    signature = f"def {name}(value, limit=10)"
    extra = f"    # revised in generation {generation}\n" if edited else ""
    body = (
        f"{signature}:\n{extra}    total = value * {i} + {file}\n"
        f"    return min(total, limit)  # module m{file}\n"
    )
    return f"pkg.m{file}.{name}", signature, body


_NODE_COLUMNS = (
    "repository_id, path, language, qualified_name, name, kind, start_line, end_line, "
    "signature, body, content_hash, generation, embedding"
)


async def insert_nodes(conn: asyncpg.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Code nodes through a staging table: COPY cannot compute their tsvector."""
    async with conn.transaction():
        await conn.execute(
            "CREATE TEMP TABLE stage_nodes (repository_id bigint, path text, language text, "
            "qualified_name text, name text, kind text, start_line int, end_line int, "
            "signature text, body text, content_hash text, generation bigint, "
            "embedding vector(384)) ON COMMIT DROP"
        )
        await conn.copy_records_to_table("stage_nodes", records=rows)
        await conn.execute(
            f"INSERT INTO code_nodes ({_NODE_COLUMNS}, tsv) "
            f"SELECT {_NODE_COLUMNS}, to_tsvector('simple', body) FROM stage_nodes"
        )


async def load_repository(url: str, nodes: int, per_file: int, seed: int) -> int:
    """The repository at generation 1, published; its id."""
    rng = np.random.default_rng(seed)
    files = max(1, nodes // per_file)
    conn = await asyncpg.connect(url)
    try:
        await register_vector(conn)
        repository_id: int = await conn.fetchval(
            "INSERT INTO repositories (slug, source, source_kind, public, indexed_at, "
            "published_generation, commit_sha, branch) "
            "VALUES ($1, '/bench', 'dir', true, now(), 1, 'c1', 'main') RETURNING id",
            SLUG,
        )
        await conn.copy_records_to_table(
            "files",
            records=[
                (repository_id, f"pkg/m{f}.py", "h1", "python", "code", 100, 1)
                for f in range(files)
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
        start = time.perf_counter()
        # Loading into indexed tables would insert into the indexes row by row (as in
        # bench.search); a generation's own writes later go through them like an index run's.
        for name in HEAVY_INDEXES:
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
        for first in range(0, files, 1000):
            rows = []
            chunk = range(first, min(files, first + 1000))
            vectors = random_unit(rng, len(chunk) * per_file)
            for n, (f, i) in enumerate((f, i) for f in chunk for i in range(per_file)):
                qualified, signature, body = node_text(f, i, 1, False)
                rows.append(
                    (
                        repository_id,
                        f"pkg/m{f}.py",
                        "python",
                        qualified,
                        f"func_{i}",
                        "function",
                        i * 4 + 1,
                        i * 4 + 3,
                        signature,
                        body,
                        "h",
                        1,
                        vectors[n],
                    )
                )
            await insert_nodes(conn, rows)
        await conn.execute("SET maintenance_work_mem = '1GB'")
        for name, definition in HEAVY_INDEXES.items():
            await conn.execute(f"CREATE INDEX {name} ON {definition}")
        await conn.execute("ANALYZE")
        print(
            f"loaded {files * per_file} nodes in {time.perf_counter() - start:.1f}s",
            file=sys.stderr,
        )
        return repository_id
    finally:
        await conn.close()


async def publish_round(
    url: str, repository_id: int, generation: int, *, files: int, per_file: int, changed: float
) -> float:
    """Writes generation `generation` (a share of the files rewritten, half of them with
    edited bodies) and times its publication; seconds."""
    step = max(1, round(1 / changed))
    rewritten = list(range(0, files, step))
    conn = await asyncpg.connect(url)
    try:
        await register_vector(conn)
        async with conn.transaction():
            assert await generations.begin(conn, repository_id) == generation
            paths = [f"pkg/m{f}.py" for f in rewritten]
            await conn.execute(
                "UPDATE files SET generation = $2, content_hash = $3 "
                "WHERE repository_id = $1 AND path = ANY($4::text[])",
                repository_id,
                generation,
                f"h{generation}",
                paths,
            )
            rows = []
            for f in rewritten:
                for i in range(per_file):
                    edited = (f // step) % 2 == 0
                    qualified, signature, body = node_text(f, i, generation, edited)
                    rows.append(
                        (
                            repository_id,
                            f"pkg/m{f}.py",
                            "python",
                            qualified,
                            f"func_{i}",
                            "function",
                            i * 4 + 1,
                            i * 4 + 3 + edited,
                            signature,
                            body,
                            "h",
                            generation,
                            None,
                        )
                    )
            await insert_nodes(conn, rows)
        # What ends a real index run: one transaction deletes what the generation replaces
        # and switches the published generation (index_store.finish_repository's).
        start = time.perf_counter()
        async with conn.transaction():
            await generations.publish_rows(conn, repository_id, generation, [])
            await index_store.finish_repository(
                conn,
                repository_id,
                branch="main",
                commit=f"c{generation}",
                readme_excerpt="",
                terms=set(),
                generation=generation,
            )
        return time.perf_counter() - start
    finally:
        await conn.close()


async def load_anchors(
    commons_url: str, retrieval_url: str, repository_id: int, count: int, seed: int
) -> None:
    """`count` notes, each anchored to a node of the repository (as published now)."""
    retrieval = await asyncpg.connect(retrieval_url)
    try:
        nodes = await retrieval.fetch(
            "SELECT qualified_name, path, start_line, end_line, signature, body FROM code_nodes "
            "WHERE repository_id = $1 ORDER BY random() LIMIT $2",
            repository_id,
            count,
        )
        generation = await retrieval.fetchval(
            "SELECT published_generation FROM repositories WHERE id = $1", repository_id
        )
    finally:
        await retrieval.close()
    conn = await asyncpg.connect(commons_url)
    try:
        author = await conn.fetchval(
            "INSERT INTO users (principal_id) VALUES ('bench') RETURNING id"
        )
        ids = [uuid.uuid4() for _ in nodes]
        await conn.copy_records_to_table(
            "posts",
            records=[(i, author, f"note {n}", "b") for n, i in enumerate(ids)],
            columns=["id", "author_id", "title", "body"],
        )
        await conn.executemany(
            "INSERT INTO post_anchors (post_id, repository_id, repo, symbol, qualified_name, "
            "path, start_line, end_line, kind, signature_hash, body_hash, commit_sha, "
            "generation, checked_commit, checked_generation) VALUES ($1, $2, $3, $4, $4, $5, "
            "$6, $7, 'function', $8, $9, $10, $11, $10, $11)",
            [
                (
                    post_id,
                    repository_id,
                    SLUG,
                    node["qualified_name"],
                    node["path"],
                    node["start_line"],
                    node["end_line"],
                    signature_hash(node["signature"]),
                    body_hash(node["body"]),
                    f"c{generation}",
                    generation,
                )
                for post_id, node in zip(ids, nodes, strict=True)
            ],
        )
        await conn.execute("ANALYZE post_anchors")
    finally:
        await conn.close()


async def recheck(
    commons_url: str, retrieval_url: str, workdir: Path, batch: int
) -> tuple[float, int, int, dict[str, int]]:
    """The commons' staleness check against a real retrieval server: seconds, anchors
    checked, statuses changed, and how many anchors have each status after it."""
    settings = RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": retrieval_url,
                    "COGRAPH_DATA_DIR": str(workdir / "data"),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    # The check embeds nothing; no embedder is started.
                    "EMBEDDER_ADDR": "127.0.0.1:9",
                }
            )
        )
    )
    app = await start_retrieval(settings)
    pool = await create_pool(commons_url, max_size=4, timeouts=DbTimeouts.from_env().for_indexing())
    try:
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            watch = AnchorWatch(
                pool,
                retrieval_pb2_grpc.RetrievalServiceStub(channel),
                interval_s=3600.0,
                batch=batch,
                timeout_s=60.0,
            )
            start = time.perf_counter()
            outcome = await watch.check()
            elapsed = time.perf_counter() - start
        rows = await pool.fetch("SELECT status, count(*) FROM post_anchors GROUP BY status")
        return elapsed, outcome.checked, outcome.changed, {r[0]: int(r[1]) for r in rows}
    finally:
        await pool.close()
        await app.stop()


async def run(args: argparse.Namespace) -> None:
    with (
        cancelled_by_sigterm(),
        tempfile.TemporaryDirectory(prefix="anchors-bench-") as tmp,
        postgres_server(Path(tmp)) as base,
    ):
        suffix = uuid.uuid4().hex[:8]
        retrieval_url = await create_database(base, f"anchors_retrieval_{suffix}")
        commons_url = await create_database(base, f"anchors_commons_{suffix}")
        await migrate(retrieval_url, "retrieval", RETRIEVAL_MIGRATIONS)
        await migrate(commons_url, "commons", COMMONS_MIGRATIONS)
        repository_id = await load_repository(
            retrieval_url, args.nodes, args.nodes_per_file, args.seed
        )
        files = max(1, args.nodes // args.nodes_per_file)
        times: dict[str, list[float]] = {"without anchors": [], "with anchors": []}
        generation = 1

        async def publish() -> float:
            nonlocal generation
            generation += 1
            return await publish_round(
                retrieval_url,
                repository_id,
                generation,
                files=files,
                per_file=args.nodes_per_file,
                changed=args.changed,
            )

        await publish()  # warms the caches; not counted
        for _ in range(args.rounds):
            times["without anchors"].append(await publish())
        await load_anchors(commons_url, retrieval_url, repository_id, args.anchors, args.seed)
        for _ in range(args.rounds):
            times["with anchors"].append(await publish())
        elapsed, checked, changed, statuses = await recheck(
            commons_url, retrieval_url, Path(tmp), args.batch
        )
    print(
        f"\nanchors and publication: {files * args.nodes_per_file:,} code nodes in {files:,} "
        f"files, {args.changed:.0%} of the files rewritten per generation (half with other "
        f"bodies), {args.anchors:,} anchored notes\n"
    )
    for label, values in times.items():
        print(
            f"publication {label:<16} {statistics.median(values) * 1000:>9.1f} ms median "
            f"({', '.join(f'{v * 1000:.1f}' for v in values)})"
        )
    print(
        f"commons re-check            {elapsed * 1000:>9.1f} ms for {checked:,} anchors "
        f"({checked / elapsed:,.0f}/s, batches of {args.batch}); {changed:,} changed status: "
        + ", ".join(f"{n:,} {s}" for s, n in sorted(statuses.items()))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--nodes-per-file", type=int, default=20)
    parser.add_argument("--anchors", type=int, default=10_000)
    parser.add_argument("--changed", type=float, default=0.1, help="share of files rewritten")
    parser.add_argument(
        "--rounds", type=int, default=3, help="publications timed without, then with anchors"
    )
    parser.add_argument("--batch", type=int, default=200, help="COMMONS_ANCHOR_CHECK_BATCH")
    parser.add_argument("--seed", type=int, default=7)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Indexing throughput on a real codebase, and how busy the pipeline keeps the embedder.

    python -m bench.index [--package jinja2 | --source PATH] [--workers 2] [--lane bulk] [--once]

Indexes the source of an installed package (default: jinja2 from this environment, a plain
directory so times come from mtimes), a directory, or the committed tree of a git
repository's HEAD (`--source .` is this project as committed, without `.venv`) into a fresh
database, with the embedder running as its own process (`python -m embedder`) the way
production runs it. Prints files/s, nodes/s, embeddings/s and the share of wall time during
which at least one Embed call was in flight (target >= 80%: parsing, blaming and writing
overlap with embedding). A second, unchanged run shows the incremental path (nothing
embedded); a third, after a line was appended to every file, replaces the whole index
(every file's rows written anew, the previous ones deleted when the run is published);
`--once` stops after the first run. `--lane query` sends the Embed calls at query priority,
as indexing did before the embedder's bulk lane (issue 28), for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.internal_auth import signed_channel, with_secret
from cograph_api.embedder_client import EmbedderClient
from retrieval.app import MIGRATIONS
from retrieval.indexing.indexer import Indexer, RepositoryRequest
from retrieval.indexing.jobs import Job
from retrieval.indexing.summaries import ExtractiveSummarizer
from retrieval.settings import IndexSettings
from svckit.config import Env
from svckit.db import DbTimeouts, create_database, create_pool, drop_database
from svckit.embedded import EmbeddedPostgres, cancelled_by_sigterm
from svckit.migrations import migrate

CACHE = Path(__file__).resolve().parent.parent / ".cograph" / "test-models"


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed here")
    return Path(next(iter(spec.submodule_search_locations)))


def start_embedder(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / "embedder.port"
    env = with_secret(
        {
            **os.environ,
            "EMBEDDER_LISTEN": "127.0.0.1:0",
            "EMBEDDER_READY_FILE": str(ready),
            "EMBEDDER_CACHE_DIR": str(CACHE),
            "COGRAPH_LOG_LEVEL": "WARNING",
        }
    )
    process = subprocess.Popen([sys.executable, "-m", "embedder"], env=env)
    deadline = time.monotonic() + 300
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the embedder did not start")
        time.sleep(0.2)
    return process, f"127.0.0.1:{ready.read_text().strip()}"


def copy_source(source: Path, copy: Path) -> None:
    """A plain copy of `source` at `copy`: a git repository's committed HEAD tree (work tree
    or bare), else the directory itself without caches."""
    inside = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "--verify", "--quiet", "HEAD"],
        capture_output=True,
        check=False,
    )
    if inside.returncode != 0:
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        return
    copy.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(source), "archive", "--format=tar", "HEAD"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive.stdout, check=True)


async def run(source: Path, workers: int, workdir: Path, lane: str, once: bool) -> None:
    with cancelled_by_sigterm():  # a killed run still stops its server
        await _run(source, workers, workdir, lane, once)


async def _run(source: Path, workers: int, workdir: Path, lane: str, once: bool) -> None:
    server: EmbeddedPostgres | None = None
    root_url = os.environ.get("COGRAPH_DATABASE_URL")
    if not root_url:
        server = EmbeddedPostgres(workdir / "pg")
        root_url = server.start()
    database = f"bench_index_{uuid.uuid4().hex[:8]}"
    url = await create_database(root_url, database)
    process, address = start_embedder(workdir)
    channel = signed_channel(address)
    try:
        await migrate(url, "retrieval", MIGRATIONS)
        # The indexer's budget, as in the retrieval service (its statements are long).
        pool = await create_pool(url, max_size=8, timeouts=DbTimeouts.from_env().for_indexing())
        settings = IndexSettings.from_env(Env({"RETRIEVAL_PARSE_WORKERS": str(workers)}))
        client = EmbedderClient(channel, timeout_s=120)
        await client.embed(["warm up"])
        if lane == "bulk":  # as the retrieval service indexes
            client = client.for_bulk()
        indexer = Indexer(pool, client, settings, ExtractiveSummarizer(), workdir / "data")
        # A copy, so the changed re-run can edit every file.
        name = source.name.removesuffix(".git") if source.name != "repo" else source.parent.name
        copy = workdir / "src" / name
        copy_source(source, copy)
        request = RepositoryRequest(str(copy), "local/bench/" + name.lower().replace("+", "-"))

        job = Job("bench", "repository", request.slug)
        start = time.perf_counter()
        stats = await indexer.index_repository(request, job)
        wall = time.perf_counter() - start
        p = job.progress
        print(f"source: {source}, Embed calls in the {lane} lane")
        print(
            f"files {p.files_done} (skipped {dict(p.skipped)}), nodes {p.nodes}, "
            f"edges {p.edges}, doc chunks {p.chunks}, embeddings {stats.texts} "
            f"in {stats.batches} calls"
        )
        print(
            f"wall {wall:.1f} s (pipeline {stats.wall_s:.1f} s, "
            f"the rest {wall - stats.wall_s:.2f} s: listing, linking, publication)"
        )
        print(
            f"files/s {p.files_done / wall:.1f}   nodes/s {p.nodes / wall:.1f}   "
            f"embeddings/s {stats.texts / wall:.1f}"
        )
        print(
            f"embedder busy: {stats.embed_busy_s / wall:.1%} of wall time "
            f"({stats.busy_share:.1%} of the pipeline)"
        )
        if once:
            await pool.close()
            return

        again = Job("bench-2", "repository", request.slug)
        start = time.perf_counter()
        stats2 = await indexer.index_repository(request, again)
        print(
            f"unchanged re-run: {time.perf_counter() - start:.2f} s, "
            f"{again.progress.files_unchanged} files unchanged, {stats2.texts} embeddings"
        )

        for path in copy.rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ".txt", ".rst"}:
                with path.open("a") as handle:
                    handle.write("\n# changed\n")
        changed = Job("bench-3", "repository", request.slug)
        start = time.perf_counter()
        stats3 = await indexer.index_repository(request, changed)
        wall3 = time.perf_counter() - start
        nodes = await pool.fetchval("SELECT count(*) FROM code_nodes")
        print(
            f"changed re-run: {wall3:.1f} s (pipeline {stats3.wall_s:.1f} s, the rest "
            f"{wall3 - stats3.wall_s:.2f} s), {changed.progress.files_done} files rewritten, "
            f"{stats3.texts} embeddings, {nodes} nodes stored after it"
        )
        await pool.close()
    finally:
        await channel.close(None)
        process.terminate()
        process.wait(timeout=30)
        await drop_database(root_url, database)
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--package", default="jinja2", help="an installed package to index")
    group.add_argument("--source", help="a directory or git repository to index")
    parser.add_argument("--workers", type=int, default=2, help="prepare threads")
    parser.add_argument("--lane", choices=("bulk", "query"), default="bulk", help="Embed priority")
    parser.add_argument("--once", action="store_true", help="the first index only, no re-runs")
    args = parser.parse_args()
    source = Path(args.source).resolve() if args.source else package_dir(args.package)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as workdir:
        asyncio.run(run(source, args.workers, Path(workdir), args.lane, args.once))


if __name__ == "__main__":
    main()

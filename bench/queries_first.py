"""Searches while repositories are indexed (issue 28, "Queries first").

    python -m bench.queries_first [--clients 8] [--idle-s 20] [--load-s 30] [--index-s 60]

Real processes, as production runs them: PostgreSQL (embedded unless COGRAPH_DATABASE_URL),
`python -m embedder`, `python -m retrieval` and `python -m commons`. A small repository is
indexed and a few notes posted first, so both searches have something to find. Then
`--clients` concurrent clients alternate code searches (retrieval Search) and note
searches (commons SearchPosts) over gRPC, through three phases of the same run:

1. idle: nothing else runs (the baseline latency);
2. lane-less load: the bench itself sends indexing-shaped Embed calls (two jobs, three
   calls of 64 code chunks of 2,000 characters in flight each, as RETRIEVAL_EMBED_BATCH and
   RETRIEVAL_EMBED_CONCURRENCY send them) at query priority, which is how every indexing
   call reached the embedder before its bulk lane: the behaviour of issue 28;
3. indexing: two real index jobs (pip's _internal and _vendor, copied to plain
   directories) run through retrieval, whose indexer uses the bulk lane.

For each phase: the share of code searches answered and the share answered with their
vector stream, the share of note searches answered (a note search without its query
vector is a 503 semantic_search_unavailable), and p50/p95 latency. Target in the
indexing phase: >= 99% answered and with vector stream, p95 within 2x of idle.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from bench.commons import all_embedded, note_texts, start_process
from bench.corpus import QUERIES, code_chunks
from bench.databases import postgres_server
from bench.embedder import CACHE
from bench.index import package_dir
from bench.internal_auth import signed_channel
from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.embedder_client import EmbedderClient
from svckit.db import create_database
from svckit.embedded import cancelled_by_sigterm
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER

ADMIN = ((PRINCIPAL_HEADER, "root"), (ADMIN_HEADER, "1"))
NOTE_QUERIES = [
    "how to parse the configuration file",
    "retry a failed request with backoff",
    "read a file and split it into lines",
    "compare two version strings",
]
# A client gives a search this long; the services' own query-embedding deadline
# (EMBEDDER_TIMEOUT_S, 2 s) is what decides whether the vector stream makes it.
SEARCH_DEADLINE_S = 30.0
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    code_ms: list[float] = field(default_factory=list)
    code_failed: int = 0
    code_with_vector: int = 0
    note_ms: list[float] = field(default_factory=list)
    note_failed: int = 0

    @property
    def code(self) -> int:
        return len(self.code_ms) + self.code_failed

    @property
    def notes(self) -> int:
        return len(self.note_ms) + self.note_failed


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


async def search_clients(
    clients: int,
    retrieval: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    commons: commons_pb2_grpc.CommonsServiceAsyncStub,
    until: asyncio.Event,
) -> Tally:
    tally = Tally()

    async def client(n: int) -> None:
        i = n
        while not until.is_set():
            started = time.perf_counter()
            if i % 2 == 0:
                try:
                    reply = await retrieval.Search(
                        pb.SearchRequest(query=QUERIES[i % len(QUERIES)]),
                        metadata=ADMIN,
                        timeout=SEARCH_DEADLINE_S,
                    )
                except grpc.aio.AioRpcError:
                    tally.code_failed += 1
                else:
                    tally.code_ms.append((time.perf_counter() - started) * 1000)
                    if reply.streams.vector == pb.STREAM_STATUS_OK:
                        tally.code_with_vector += 1
            else:
                try:
                    await commons.SearchPosts(
                        commons_pb2.SearchPostsRequest(query=NOTE_QUERIES[i % len(NOTE_QUERIES)]),
                        metadata=ADMIN,
                        timeout=SEARCH_DEADLINE_S,
                    )
                except grpc.aio.AioRpcError:
                    tally.note_failed += 1
                else:
                    tally.note_ms.append((time.perf_counter() - started) * 1000)
            i += 1

    await asyncio.gather(*(client(n) for n in range(clients)))
    return tally


async def measure(
    clients: int,
    retrieval: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    commons: commons_pb2_grpc.CommonsServiceAsyncStub,
    seconds: float,
) -> Tally:
    until = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(seconds, until.set)
    return await search_clients(clients, retrieval, commons, until)


async def laneless_load(embedder_addr: str, until: asyncio.Event) -> int:
    """Indexing-shaped Embed calls at query priority: two jobs' worth, three calls of 64
    chunks in flight each. Returns the texts embedded."""
    chunks = code_chunks(384, chars=2000, seed=11)
    done = 0
    async with signed_channel(embedder_addr) as channel:
        client = EmbedderClient(channel, timeout_s=120.0)

        async def stream(k: int) -> None:
            nonlocal done
            while not until.is_set():
                await client.embed(chunks[k * 64 : (k + 1) * 64])
                done += 64

        await asyncio.gather(*(stream(k) for k in range(6)))
    return done


async def wait_jobs(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, ids: list[str], deadline_s: float
) -> list[pb.Job]:
    deadline = time.monotonic() + deadline_s
    while True:
        jobs = [
            (await stub.GetJob(pb.GetJobRequest(job_id=i), metadata=ADMIN, timeout=10)).job
            for i in ids
        ]
        finished = all(j.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED) for j in jobs)
        if finished or time.monotonic() > deadline:
            return jobs
        await asyncio.sleep(0.5)


@contextmanager
def services(workdir: Path, urls: tuple[str, str]) -> Iterator[tuple[str, str, str]]:
    quiet = {"COGRAPH_LOG_LEVEL": "WARNING"}
    with ExitStack() as stack:

        def started(module: str, env: dict[str, str]) -> str:
            ready = workdir / f"{module}.port"
            process = start_process(
                module, {**quiet, **env, f"{module.upper()}_READY_FILE": str(ready)}, ready
            )

            def stop(p: subprocess.Popen[bytes] = process) -> None:
                p.terminate()
                p.wait(30)

            stack.callback(stop)
            return f"127.0.0.1:{ready.read_text().strip()}"

        embedder = started(
            "embedder", {"EMBEDDER_LISTEN": "127.0.0.1:0", "EMBEDDER_CACHE_DIR": str(CACHE)}
        )
        retrieval = started(
            "retrieval",
            {
                "RETRIEVAL_LISTEN": "127.0.0.1:0",
                "COGRAPH_DATABASE_URL": urls[0],
                "COGRAPH_DATA_DIR": str(workdir / "data"),
                "EMBEDDER_ADDR": embedder,
            },
        )
        commons = started(
            "commons",
            {
                "COMMONS_LISTEN": "127.0.0.1:0",
                "COGRAPH_DATABASE_URL": urls[1],
                "EMBEDDER_ADDR": embedder,
                "COMMONS_BACKFILL_INTERVAL_S": "1",
            },
        )
        yield embedder, retrieval, commons


async def run(args: argparse.Namespace) -> None:
    with (
        cancelled_by_sigterm(),
        tempfile.TemporaryDirectory(prefix="queries-first-") as tmp,
        postgres_server(Path(tmp)) as base,
    ):
        workdir = Path(tmp)
        suffix = os.urandom(4).hex()
        urls = (
            await create_database(base, f"qf_retrieval_{suffix}"),
            await create_database(base, f"qf_commons_{suffix}"),
        )
        pip = package_dir("pip")
        sources = []
        for name in ("_internal", "_vendor"):
            target = workdir / "src" / name
            shutil.copytree(pip / name, target)
            sources.append(target)
        seed = workdir / "src" / "svckit"
        shutil.copytree(REPO / "libs" / "svckit", seed)
        with services(workdir, urls) as (embedder, retrieval_addr, commons_addr):
            async with (
                signed_channel(retrieval_addr) as rc,
                signed_channel(commons_addr) as cc,
            ):
                retrieval = retrieval_pb2_grpc.RetrievalServiceStub(rc)
                commons = commons_pb2_grpc.CommonsServiceStub(cc)
                print("seeding: indexing libs/svckit, posting 40 notes", flush=True)
                job = await retrieval.IndexRepository(
                    pb.IndexRepositoryRequest(source=str(seed), slug="local/bench/seed"),
                    metadata=ADMIN,
                    timeout=30,
                )
                (seeded,) = await wait_jobs(retrieval, [job.job.id], 600)
                assert seeded.state == pb.JOB_STATE_SUCCEEDED, seeded.error
                for title, body in note_texts(40, seed=5):
                    await commons.CreatePost(
                        commons_pb2.CreatePostRequest(title=title, body=body, tags=["bench"]),
                        metadata=ADMIN,
                        timeout=60,
                    )
                await all_embedded(urls[1])
                await measure(args.clients, retrieval, commons, 3)  # warm-up, not counted

                print(f"idle: {args.idle_s:g} s", flush=True)
                idle = await measure(args.clients, retrieval, commons, args.idle_s)

                print(f"lane-less load: {args.load_s:g} s", flush=True)
                until = asyncio.Event()
                load_task = asyncio.create_task(laneless_load(embedder, until))
                await asyncio.sleep(1)  # let the calls queue up
                laneless = await measure(args.clients, retrieval, commons, args.load_s)
                until.set()
                load_texts = await load_task
                # The searches' circuit breakers opened under that load: let them close
                # (EMBEDDER_BREAKER_COOLDOWN_S, 5 s) so the next phase starts clean.
                await asyncio.sleep(6)
                await measure(args.clients, retrieval, commons, 3)  # not counted

                print(f"indexing (bulk lane): up to {args.index_s:g} s", flush=True)
                ids = []
                for source in sources:
                    started = await retrieval.IndexRepository(
                        pb.IndexRepositoryRequest(
                            source=str(source), slug=f"local/bench/{source.name.strip('_')}"
                        ),
                        metadata=ADMIN,
                        timeout=30,
                    )
                    ids.append(started.job.id)
                await asyncio.sleep(3)  # past listing and parsing: the embedder is busy
                before = sum(j.progress.embeddings_done for j in await wait_jobs(retrieval, ids, 0))
                indexing = await measure(args.clients, retrieval, commons, args.index_s)
                jobs = await wait_jobs(retrieval, ids, 0)
                index_texts = sum(j.progress.embeddings_done for j in jobs) - before
    print_report(
        args,
        idle=idle,
        laneless=laneless,
        load_texts=load_texts,
        indexing=indexing,
        jobs=jobs,
        index_texts=index_texts,
    )


def print_report(
    args: argparse.Namespace,
    *,
    idle: Tally,
    laneless: Tally,
    load_texts: int,
    indexing: Tally,
    jobs: list[pb.Job],
    index_texts: int,
) -> None:
    print(
        f"\nsearches while indexing: {args.clients} clients alternating code and note "
        f"searches, {os.cpu_count()} cores\n"
    )
    header = (
        f"{'phase':<34} {'code n':>6} {'answered':>8} {'w/vector':>8} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'notes n':>7} {'answered':>8} {'p50 ms':>7} {'p95 ms':>7}"
    )
    print(header)
    print("-" * len(header))
    rows = [
        ("idle (baseline)", idle),
        ("lane-less load (before issue 28)", laneless),
        ("indexing, bulk lane (now)", indexing),
    ]
    for name, t in rows:
        print(
            f"{name:<34} {t.code:>6} {share(len(t.code_ms), t.code):>8} "
            f"{share(t.code_with_vector, t.code):>8} {pct(t.code_ms, 0.5):>7.1f} "
            f"{pct(t.code_ms, 0.95):>7.1f} {t.notes:>7} {share(len(t.note_ms), t.notes):>8} "
            f"{pct(t.note_ms, 0.5):>7.1f} {pct(t.note_ms, 0.95):>7.1f}"
        )
    print(f"\nlane-less load embedded {load_texts} chunks in {args.load_s:g} s")
    print(f"the index jobs embedded {index_texts} texts during the {args.index_s:g} s measured")
    for job in jobs:
        state = pb.JobState.Name(job.state)
        print(
            f"index job {job.target}: {state}, {job.progress.files_done}/"
            f"{job.progress.files_total} files, {job.progress.embeddings_done}/"
            f"{job.progress.embeddings_total} texts embedded"
            + (f", error: {job.error}" if job.error else "")
        )
    code_ratio = pct(indexing.code_ms, 0.95) / pct(idle.code_ms, 0.95)
    note_ratio = pct(indexing.note_ms, 0.95) / pct(idle.note_ms, 0.95)
    print(
        f"indexing vs idle p95: code {code_ratio:.2f}x, notes {note_ratio:.2f}x "
        "(target <= 2x); answered and with vector stream target >= 99%"
    )
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--load-s", type=float, default=30.0)
    parser.add_argument("--index-s", type=float, default=60.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

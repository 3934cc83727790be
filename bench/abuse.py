"""Abuse: how much one key flooding the gateway slows another key's searches, with the
per-key limits (gateway.quotas) off and on, and what a 4,000-character query costs.

The stack is real and in this process, as the gateway tests run it: an embedded PostgreSQL,
the embedder, retrieval, commons and two gateways on 127.0.0.1:0 in front of the same
backends, one with GATEWAY_QUOTAS=false (the baseline, measured in the same run) and one
with the default limits. The index is written straight into the tables as bench.search and
bench.grep write theirs: --nodes code nodes and --docs doc chunks from site-packages in one
repository per package (random vectors), and one public repository of --files source files
for grep.

  cost    Search over gRPC (the retrieval service itself, no gateway): normal queries
          (symbol, signature, prose) against random 4,000-character queries, server-side
          phase times. The ratio is what a long query costs against a normal one.
  abuse   for each gateway: a victim (--victim-keys keys without grants, in turn, so no
          victim key is over its own allowance) searches one query after another, in
          --rounds rounds of an idle window then an attacked one (--seconds of each in
          all; taking turns, load from outside the benchmark falls on both alike). In an
          attacked window an attacker key (no grants either), in a process of its own,
          floods at full speed (no back-off, a 429 is retried at once) with --workers
          connections each for 4,000-character searches, the pathological grep
          `(a{1,100}){1,100}$` and note posts. The victim's p50 / p95 under attack over
          its idle ones is the figure; the attacker's answers are counted by status, and
          the CPU seconds the gateway and the attacking client used in the windows are
          reported (the client shares this machine's cores; a remote one would not).

    .venv/bin/python -m bench.abuse                       # 20k nodes, 4 x 5 s + 5 s
    .venv/bin/python -m bench.abuse --nodes 5000 --seconds 10   # quick look
    .venv/bin/python -m bench.abuse --parts abuse --gateways on  # limits on only

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import string
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx
import numpy as np
from pgvector.asyncpg import register_vector

from bench import grep as grep_bench
from bench import search as search_bench
from bench.databases import scratch_database
from bench.internal_auth import with_secret
from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from commons.app import start_commons
from commons.settings import CommonsSettings
from gateway.keys_store import KeysStore
from retrieval.app import MIGRATIONS
from svckit.config import Env
from svckit.db import create_pool
from svckit.migrations import migrate

LONG_QUERY_CHARS = 4000  # limits.SEARCH_QUERY_MAX_CHARS: the longest a caller may send
HOSTILE_GREP = "(a{1,100}){1,100}$"


def random_query(rng: random.Random, chars: int = LONG_QUERY_CHARS) -> str:
    """Random letters and digits in words of 1 to 12, as the penetration test sent."""
    words: list[str] = []
    size = 0
    while size < chars:
        word = "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(1, 12)))
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


def pct(values: list[float], q: float) -> float:
    return search_bench.pct(values, q)


# ---------------------------------------------------------------- the index


async def build_index(db_url: str, args: argparse.Namespace) -> dict[str, Any]:
    nodes = await asyncio.to_thread(search_bench.collect_nodes, args.nodes)
    docs = await asyncio.to_thread(search_bench.collect_docs, args.docs)
    for node in nodes:
        node.summary = search_bench.summarize(node)
    texts = await asyncio.to_thread(
        grep_bench.collect, Path(sysconfig.get_paths()["purelib"]), args.files
    )
    rng = np.random.default_rng(args.seed)
    await migrate(db_url, "retrieval", MIGRATIONS)
    conn = await asyncpg.connect(db_url)
    try:
        await register_vector(conn)
        await search_bench.load(
            conn,
            nodes,
            docs,
            node_vectors=search_bench.random_unit(rng, len(nodes)),
            summary_vectors=search_bench.random_unit(rng, len(nodes)),
            doc_vectors=search_bench.random_unit(rng, len(docs)),
            seed=args.seed,
        )
        await grep_bench.load(conn, texts)
    finally:
        await conn.close()
    queries = [q.text for q in search_bench.make_queries(nodes, len(nodes), 30, args.seed)]
    return {"nodes": len(nodes), "docs": len(docs), "files": len(texts), "queries": queries}


# ---------------------------------------------------------------- cost of a long query


async def measure_cost(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, queries: list[str], seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    long_queries = [random_query(rng) for _ in range(len(queries) // 3 or 1)]
    metadata = tuple(search_bench.METADATA)
    out: dict[str, Any] = {}
    for kind, texts in (("normal", queries), ("random 4,000 chars", long_queries)):
        for text in texts[:3]:  # warm-up
            with contextlib.suppress(grpc.aio.AioRpcError):
                await stub.Search(pb.SearchRequest(query=text), metadata=metadata, timeout=60)
        total: list[float] = []
        phases: dict[str, list[float]] = {}
        failed: Counter[str] = Counter()
        for text in texts:
            started = time.perf_counter()
            try:
                reply = await stub.Search(
                    pb.SearchRequest(query=text), metadata=metadata, timeout=60
                )
            except grpc.aio.AioRpcError as err:
                failed[err.code().name] += 1
                continue
            finally:
                total.append((time.perf_counter() - started) * 1000)
            for name, value in reply.timings_ms.items():
                phases.setdefault(name, []).append(value)
        out[kind] = {
            "n": len(texts),
            "failed": dict(failed),
            "p50_ms": pct(total, 0.5),
            "p95_ms": pct(total, 0.95),
            "phases_p50_ms": {name: pct(v, 0.5) for name, v in sorted(phases.items())},
        }
    return out


# ---------------------------------------------------------------- the attacker


async def attack(url: str, key: str, repo: str, seconds: float, workers: int) -> dict[str, Any]:
    """Runs in its own process: `workers` connections each for search, grep and posts."""
    rng = random.Random(1)
    statuses: dict[str, Counter[int]] = {"search": Counter(), "grep": Counter(), "post": Counter()}
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=3 * workers, max_keepalive_connections=3 * workers)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60, limits=limits
    ) as client:

        async def loop(kind: str) -> None:
            number = 0
            while time.monotonic() < deadline:
                number += 1
                try:
                    if kind == "search":
                        reply = await client.post(
                            "/api/search", json={"query": random_query(rng), "top_k": 10}
                        )
                    elif kind == "grep":
                        reply = await client.post(
                            "/api/grep", json={"repo": repo, "pattern": HOSTILE_GREP, "regex": True}
                        )
                    else:
                        reply = await client.post(
                            "/v1/posts",
                            json={"title": f"flood {number}", "body": random_query(rng, 600)},
                        )
                    statuses[kind][reply.status_code] += 1
                except httpx.HTTPError:
                    statuses[kind][0] += 1

        await asyncio.gather(*(loop(kind) for kind in statuses for _ in range(workers)))
    out: dict[str, Any] = {kind: dict(sorted(c.items())) for kind, c in statuses.items()}
    out["cpu_s"] = time.process_time()  # the client's own CPU, start-up included
    return out


async def attacker_process(
    url: str, key: str, repo: str, seconds: float, workers: int
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.abuse",
        "--attack",
        json.dumps({"url": url, "key": key, "repo": repo, "seconds": seconds, "workers": workers}),
        stdout=asyncio.subprocess.PIPE,
    )


# ---------------------------------------------------------------- the victim


async def victim(
    clients: list[httpx.AsyncClient], queries: list[str], seconds: float
) -> tuple[list[float], Counter[str]]:
    """Searches one query after another for `seconds`, each time with the next of the
    victim's keys (so that no victim key outruns its own allowance: what is measured is how
    the attacker's flood slows other keys); latencies of the 200s, and how the answers went
    (status, or degraded when a stream was missing)."""
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    number = 0
    while time.monotonic() < deadline:
        query = queries[number % len(queries)]
        client = clients[number % len(clients)]
        number += 1
        started = time.perf_counter()
        reply = await client.post("/api/search", json={"query": query, "top_k": 10})
        elapsed = (time.perf_counter() - started) * 1000
        if reply.status_code != 200:
            outcomes[str(reply.status_code)] += 1
            await asyncio.sleep(0.5)
            continue
        latencies.append(elapsed)
        streams = reply.json().get("streams") or {}
        degraded = any(state not in ("ok", "skipped") for state in streams.values())
        outcomes["degraded" if degraded else "200"] += 1
    return latencies, outcomes


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far; Linux only (nan elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure_abuse(
    url: str,
    gateway_pid: int,
    *,
    db_url: str,
    pool: asyncpg.Pool,
    queries: list[str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """--rounds rounds of an idle window then an attacked one (--seconds in all for each),
    so that load from outside the benchmark drifting over the run falls on both alike."""
    keys = KeysStore(pool)
    run_id = f"{time.time_ns():x}"  # each gateway's keys and principals are new
    victim_keys = []
    for number in range(args.victim_keys):
        name = f"victim-{run_id}-{number}"
        victim_keys.append((await keys.create(name, name, False))[1])
    _, attacker_key = await keys.create(f"attacker-{run_id}", f"attacker-{run_id}", False)
    window = args.seconds / args.rounds
    idle: list[float] = []
    attacked: list[float] = []
    idle_outcomes: Counter[str] = Counter()
    attacked_outcomes: Counter[str] = Counter()
    attacker: dict[str, Counter[int]] = {}
    gateway_cpu = {"idle": 0.0, "attacked": 0.0}
    attacker_cpu = 0.0
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
                )
            )
            for key in victim_keys
        ]
        for number, query in enumerate(queries[:5]):  # warm-up
            await clients[number % len(clients)].post(
                "/api/search", json={"query": query, "top_k": 10}
            )
        await asyncio.sleep(10)  # the victim keys' warm-up tokens back
        for _ in range(args.rounds):
            before = cpu_seconds(gateway_pid)
            latencies, outcomes = await victim(clients, queries, window)
            gateway_cpu["idle"] += cpu_seconds(gateway_pid) - before
            idle += latencies
            idle_outcomes += outcomes
            process = await attacker_process(
                url, attacker_key, grep_bench.SLUG, window + 2, args.workers
            )
            await asyncio.sleep(2)  # the flood under way
            before = cpu_seconds(gateway_pid)
            latencies, outcomes = await victim(clients, queries, window)
            gateway_cpu["attacked"] += cpu_seconds(gateway_pid) - before
            attacked += latencies
            attacked_outcomes += outcomes
            output, _ = await process.communicate()
            report = json.loads(output.decode().strip().splitlines()[-1])
            attacker_cpu += report.pop("cpu_s")
            for kind, statuses in report.items():
                attacker.setdefault(kind, Counter()).update(
                    {int(status): n for status, n in statuses.items()}
                )
            await drain_notes(db_url)  # the flood's notes embedded before the next window
    return {
        "idle": {"p50_ms": pct(idle, 0.5), "p95_ms": pct(idle, 0.95), "n": len(idle)},
        "idle_outcomes": dict(idle_outcomes),
        "attacked": {
            "p50_ms": pct(attacked, 0.5),
            "p95_ms": pct(attacked, 0.95),
            "n": len(attacked),
            "mean_ms": statistics.fmean(attacked) if attacked else float("nan"),
        },
        "attacked_outcomes": dict(attacked_outcomes),
        "attacker": {kind: dict(sorted(c.items())) for kind, c in attacker.items()},
        # CPU seconds over the measured windows (--seconds each): what the flood cost the
        # gateway, and what the attacking client itself burnt on the same machine.
        "gateway_cpu_s": gateway_cpu,
        "attacker_cpu_s": attacker_cpu,
    }


# ---------------------------------------------------------------- the run


@asynccontextmanager
async def gateway(
    url: str, addrs: dict[str, str], quotas: bool, workdir: Path
) -> AsyncIterator[tuple[str, int]]:
    """`python -m gateway` in a process of its own, as deployed: a flood of 429s costs the
    gateway's CPU, not the backends' event loop. Yields its base URL and process id."""
    ready = workdir / f"gateway-{time.time_ns():x}.port"
    environ = with_secret(
        {
            **os.environ,
            "GATEWAY_LISTEN": "127.0.0.1:0",
            "GATEWAY_READY_FILE": str(ready),
            "COGRAPH_DATABASE_URL": url,
            "COGRAPH_LOG_LEVEL": "WARNING",
            "GATEWAY_QUOTAS": "true" if quotas else "false",
            **{f"{name.upper()}_ADDR": addr for name, addr in addrs.items()},
        }
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "gateway", env=environ)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if process.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start")
            await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{int(ready.read_text())}", process.pid
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)


async def drain_notes(db_url: str, timeout_s: float = 300) -> None:
    """Waits until commons has embedded every note (a flood's backlog holds the embedder,
    which the next phase's searches need)."""
    conn = await asyncpg.connect(db_url)
    try:
        deadline = time.monotonic() + timeout_s
        while await conn.fetchval("SELECT count(*) FROM posts WHERE embedding IS NULL"):
            if time.monotonic() > deadline:
                raise RuntimeError("commons did not embed the flood's notes in time")
            await asyncio.sleep(1)
    finally:
        await conn.close()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {}
    workdir = Path(args.workdir)
    async with scratch_database("bench_abuse") as db_url, AsyncExitStack() as stack:
        started = time.perf_counter()
        built = await build_index(db_url, args)
        queries = built.pop("queries")
        report["index"] = built
        print(f"index: {built} ({time.perf_counter() - started:.0f} s)", flush=True)
        embedder_app = await stack.enter_async_context(search_bench.embedder())
        embedder_addr = f"127.0.0.1:{embedder_app.port}"
        retrieval_app, stub = await stack.enter_async_context(
            search_bench.retrieval_server(db_url, workdir, embedder_addr, True)
        )
        commons = await start_commons(
            CommonsSettings.from_env(
                Env(
                    with_secret(
                        {
                            "COMMONS_LISTEN": "127.0.0.1:0",
                            "COGRAPH_DATABASE_URL": db_url,
                            "EMBEDDER_ADDR": embedder_addr,
                        }
                    )
                )
            )
        )
        stack.push_async_callback(commons.stop)
        addrs = {
            "retrieval": f"127.0.0.1:{retrieval_app.port}",
            "commons": f"127.0.0.1:{commons.port}",
        }
        if "cost" in args.parts:
            report["cost"] = await measure_cost(stub, queries, args.seed)
            print(f"cost: {json.dumps(report['cost'])}", flush=True)
        if "abuse" in args.parts:
            pool = await create_pool(db_url)
            stack.push_async_callback(pool.close)
            for quotas in (False, True):
                if ("on" if quotas else "off") not in args.gateways:
                    continue
                name = "limits on" if quotas else "limits off"
                async with gateway(db_url, addrs, quotas, workdir) as (gateway_url, pid):
                    report[name] = await measure_abuse(
                        gateway_url, pid, db_url=db_url, pool=pool, queries=queries, args=args
                    )
                print(f"{name}: {json.dumps(report[name])}", flush=True)
                await drain_notes(db_url)
    return report


def print_report(report: dict[str, Any], args: argparse.Namespace) -> None:
    index = report["index"]
    print()
    print(
        f"Index: {index['nodes']} code nodes, {index['docs']} doc chunks, {index['files']} "
        "files for grep"
    )
    cost = report.get("cost")
    if cost:
        normal, long = cost["normal"], cost["random 4,000 chars"]
        print(f"{'Search over gRPC':34}{'p50 ms':>10}{'p95 ms':>10}{'n':>5}  phases p50 ms")
        for kind, row in cost.items():
            phases = ", ".join(
                f"{k} {v:.1f}" for k, v in row["phases_p50_ms"].items() if k != "total"
            )
            failed = f" failed {row['failed']}" if row["failed"] else ""
            print(
                f"{kind:34}{row['p50_ms']:>10.1f}{row['p95_ms']:>10.1f}{row['n']:>5}  "
                f"{phases}{failed}"
            )
        print(
            f"4,000-char / normal: p50 x{long['p50_ms'] / normal['p50_ms']:.2f}, "
            f"p95 x{long['p95_ms'] / normal['p95_ms']:.2f}"
        )
    for name in ("limits off", "limits on"):
        row = report.get(name)
        if not row:
            continue
        idle, hit = row["idle"], row["attacked"]
        print(
            f"{name}: victim search p50 {idle['p50_ms']:.1f} -> {hit['p50_ms']:.1f} ms "
            f"(x{hit['p50_ms'] / idle['p50_ms']:.2f}), p95 {idle['p95_ms']:.1f} -> "
            f"{hit['p95_ms']:.1f} ms (x{hit['p95_ms'] / idle['p95_ms']:.2f}); "
            f"victim answers idle {row['idle_outcomes']}, under attack "
            f"{row['attacked_outcomes']}; attacker ({args.workers} connections each) "
            f"{row['attacker']}; CPU s over the windows: gateway idle "
            f"{row['gateway_cpu_s']['idle']:.1f}, attacked {row['gateway_cpu_s']['attacked']:.1f}; "
            f"attacking client {row['attacker_cpu_s']:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000, help="code nodes to index")
    parser.add_argument("--docs", type=int, default=2_000, help="doc chunks to index")
    parser.add_argument("--files", type=int, default=2_000, help="files for grep")
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="idle and attacked, each, in all rounds"
    )
    parser.add_argument("--rounds", type=int, default=4, help="idle / attacked windows, in turn")
    parser.add_argument("--workers", type=int, default=8, help="attacker connections per kind")
    parser.add_argument("--victim-keys", type=int, default=8, help="keys the victim rotates")
    parser.add_argument("--parts", default="cost,abuse", help="cost, abuse or both")
    parser.add_argument(
        "--gateways", default="off,on", help="which gateways: limits off, on or both"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--workdir", default=tempfile.gettempdir())
    parser.add_argument("--attack", help=argparse.SUPPRESS)  # the attacker process
    args = parser.parse_args()
    if args.attack:
        spec = json.loads(args.attack)
        print(json.dumps(asyncio.run(attack(**spec))), flush=True)
        return
    args.parts = {part.strip() for part in args.parts.split(",")}
    args.gateways = {part.strip() for part in args.gateways.split(",")}
    report = asyncio.run(run(args))
    print_report(report, args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

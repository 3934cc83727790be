"""Throughput: requests/s and latency of searches from N concurrent clients, over REST and
over MCP, with the CPU seconds each service process spends per search.

The index is bench.search's (its corpus, loader and queries): --nodes code nodes and
--docs doc chunks from site-packages in one repository per package, real embeddings for
--real nodes sampled across the corpus (bench.search.real_first) and random unit vectors
for the rest (--filler near: noisy copies of the real ones), 80% of the repositories
public, searched as a non-admin principal with grants on half of the private ones.

The services run as `cograph up` runs them (cograph_cli.supervisor: `python -m embedder`,
`python -m retrieval`, `python -m gateway`, each a process of its own on a 127.0.0.1 port
the OS picks, production defaults); MCP is the gateway's own /mcp endpoint (streamable
HTTP), so it is measured in the gateway process. The load comes from a separate client
process (so its CPU is not in the services' processes; it still shares the machine's
cores), in three phases, one after another:

  single  1 client over REST, one search after another: the unloaded latency (baseline)
  rest    --clients clients over REST (`POST /api/search`), each its own connection
  mcp     --clients MCP sessions (the `mcp` SDK's client, tool cograph_search)

Each client sends one search after another (the queries of bench.search.make_queries,
symbol, signature and prose mixed, each client starting at its own offset), top_k 10 on
both transports. After --warmup seconds of the same load, --seconds are measured: the
searches that complete in that window count (requests/s, p50/p95/p99 of the 200s), and
the CPU time (user + system) each service process, PostgreSQL (all of it, and pg_queries:
the backends of the services' connections), the client process and the whole machine used
in the same window is divided by them.

The gateway's per-key limits (GATEWAY_QUOTAS) are off: a search allowance of 0.5/s per key
would refuse a flood from any key, and this benchmark measures the service, not the
limiter (bench/abuse.py measures that). All clients share one read-only key.

    .venv/bin/python -m bench.throughput                          # 20k nodes, 16 clients, 20 s
    .venv/bin/python -m bench.throughput --nodes 5000 --seconds 10  # quick look
    .venv/bin/python -m bench.throughput --json out.json

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory; no `cograph up` is needed (the benchmark
makes its own internal secret, bench/internal_auth.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import httpx2
import numpy as np
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pgvector.asyncpg import register_vector

from bench import search as search_bench
from bench.abuse import cpu_seconds
from bench.databases import scratch_database
from bench.internal_auth import signed_channel, with_secret
from cograph_api.embedder_client import EmbedderClient
from cograph_cli.services import SERVICES
from cograph_cli.supervisor import Reporter, Supervisor
from gateway.keys_store import KeysStore
from retrieval.app import MIGRATIONS
from svckit.db import create_pool
from svckit.migrations import migrate

PHASES = ("single", "rest", "mcp")
TOP_K = 10
REQUEST_TIMEOUT_S = 60.0  # one search's deadline on the client side
READY_TIMEOUT_S = 300.0  # a service's start (the embedder loads its model)
CLIENT_START_TIMEOUT_S = 120.0  # the client process's imports and its MCP sessions
DRAIN_TIMEOUT_S = REQUEST_TIMEOUT_S + 30  # the last searches after the window, and the report
STOP_TIMEOUT_S = 30.0


# ---------------------------------------------------------------- the client process


@dataclass
class Tally:
    """What one phase's clients saw in the measured window."""

    window_start: float
    window_end: float
    latencies_ms: list[float]
    outcomes: Counter[str]

    def record(self, started: float, outcome: str) -> None:
        done = time.monotonic()
        if not self.window_start <= done <= self.window_end:
            return  # warm-up, or after the window: not counted
        self.outcomes[outcome] += 1
        if outcome in ("ok", "degraded"):
            self.latencies_ms.append((done - started) * 1000)


def _answer_outcome(answer: Any) -> str:
    """ok, or degraded when a stream was unavailable (the compact form names only those)."""
    streams = answer.get("streams") if isinstance(answer, dict) else None
    missing = [k for k, v in (streams or {}).items() if k != "reasons" and v == "unavailable"]
    return "degraded" if missing else "ok"


Search = Callable[[str], Awaitable[str]]  # a query -> its outcome


@asynccontextmanager
async def rest_searcher(url: str, key: str) -> AsyncIterator[Search]:
    """One client's own connection to the gateway's REST API."""
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=REQUEST_TIMEOUT_S
    ) as client:

        async def search(query: str) -> str:
            reply = await client.post("/api/search", json={"query": query, "top_k": TOP_K})
            if reply.status_code != 200:
                return str(reply.status_code)
            return _answer_outcome(reply.json())

        yield search


@asynccontextmanager
async def mcp_searcher(url: str, key: str) -> AsyncIterator[Search]:
    """One MCP session over streamable HTTP at the gateway's /mcp, as an agent holds it."""
    transport = streamable_http_client(
        f"{url}/mcp",
        http_client=httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"}, timeout=REQUEST_TIMEOUT_S
        ),
    )
    async with Client(transport) as client:

        async def search(query: str) -> str:
            result = await client.call_tool("cograph_search", {"query": query, "top_k": TOP_K})
            content = result.structured_content
            if result.is_error:
                error = content.get("error") if isinstance(content, dict) else None
                return f"tool error {error or 'unknown'}"
            return _answer_outcome(content)

        yield search


async def drive(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in the client process: `clients` loops of one search after another until the
    window ends; prints `start` and `end` as the measured window opens and closes (the
    parent reads the services' CPU times then), and returns what the window saw."""
    queries: list[str] = spec["queries"]
    opener = mcp_searcher if spec["transport"] == "mcp" else rest_searcher
    async with contextlib.AsyncExitStack() as stack:
        # Sessions first (an MCP session's initialize is not a search), then the load.
        searchers = [
            await stack.enter_async_context(opener(spec["url"], spec["key"]))
            for _ in range(spec["clients"])
        ]
        now = time.monotonic()
        tally = Tally(now + spec["warmup"], now + spec["warmup"] + spec["seconds"], [], Counter())

        async def loop(number: int, search: Search) -> None:
            turn = number * max(1, len(queries) // len(searchers))  # each its own offset
            while time.monotonic() < tally.window_end:
                query = queries[turn % len(queries)]
                turn += 1
                started = time.monotonic()
                try:
                    outcome = await asyncio.wait_for(search(query), REQUEST_TIMEOUT_S)
                except Exception as err:  # counted, not fatal: a failure is a figure too
                    outcome = f"exception {type(err).__name__}"
                tally.record(started, outcome)

        async def marks() -> None:
            await asyncio.sleep(max(0.0, tally.window_start - time.monotonic()))
            print("start", flush=True)
            await asyncio.sleep(max(0.0, tally.window_end - time.monotonic()))
            print("end", flush=True)

        await asyncio.gather(marks(), *(loop(i, s) for i, s in enumerate(searchers)))
    return {
        "latencies_ms": tally.latencies_ms,
        "outcomes": dict(tally.outcomes),
        "window_s": tally.window_end - tally.window_start,
    }


# ---------------------------------------------------------------- CPU accounting


def postgres_cpu(postmaster: psutil.Process, database: str) -> tuple[float, float]:
    """CPU seconds of the server (postmaster, its live children and those it reaped), and
    of the backends serving connections to `database` (the services' pools: the
    searches' queries), so that background work (autovacuum, checkpoints) shows apart."""
    times = postmaster.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    serving = 0.0
    for child in postmaster.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # a backend that exited meanwhile
            child_times = child.cpu_times()
            used = child_times.user + child_times.system
            total += used
            if f" {database} " in " ".join(child.cmdline()):
                serving += used
    return total, serving


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy so far (everything running on it)."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


@dataclass
class Meter:
    """The processes whose CPU time is read at the window's edges."""

    services: dict[str, int]  # name -> pid
    postmaster: psutil.Process | None
    database: str

    def read(self, client_pid: int) -> dict[str, float]:
        out = {name: cpu_seconds(pid) for name, pid in self.services.items()}
        if self.postmaster is not None:
            try:
                out["postgres"], out["pg_queries"] = postgres_cpu(self.postmaster, self.database)
            except psutil.Error:
                out["postgres"] = out["pg_queries"] = float("nan")
        out["client"] = cpu_seconds(client_pid)
        out["machine"] = machine_busy_s()
        return out


async def find_postmaster(db_url: str) -> tuple[psutil.Process | None, str]:
    """The server's postmaster, through a backend's pid (None when it is not local), and
    the database's name."""
    conn = await asyncpg.connect(db_url)
    try:
        backend, database = await conn.fetchrow("SELECT pg_backend_pid(), current_database()")
        try:  # while the connection is open: its backend exits with it
            return psutil.Process(backend).parent(), database
        except psutil.Error:
            return None, database
    finally:
        await conn.close()


# ---------------------------------------------------------------- one phase


async def _line(stream: asyncio.StreamReader, timeout_s: float) -> str:
    raw = await asyncio.wait_for(stream.readline(), timeout_s)
    if not raw:
        raise RuntimeError("the client process ended early")
    return raw.decode().strip()


async def run_phase(name: str, spec: dict[str, Any], meter: Meter, workdir: Path) -> dict[str, Any]:
    """One phase in a fresh client process (a session of its own: its group is killed
    whatever happens)."""
    spec_path = workdir / f"client-{name}.json"
    spec_path.write_text(json.dumps(spec))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.throughput",
        "--client",
        str(spec_path),
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        line = await _line(process.stdout, CLIENT_START_TIMEOUT_S + spec["warmup"])
        if line != "start":
            raise RuntimeError(f"client: expected start, got {line!r}")
        before = meter.read(process.pid)
        line = await _line(process.stdout, spec["seconds"] + 30)
        after = meter.read(process.pid)
        if line != "end":
            raise RuntimeError(f"client: expected end, got {line!r}")
        result = json.loads(await _line(process.stdout, DRAIN_TIMEOUT_S))
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
    latencies: list[float] = result["latencies_ms"]
    outcomes: dict[str, int] = result["outcomes"]
    window = result["window_s"]
    answered = outcomes.get("ok", 0) + outcomes.get("degraded", 0)
    completed = sum(outcomes.values())
    per_request = max(completed, 1)
    cpu_s = {key: after[key] - before[key] for key in after}
    return {
        "clients": spec["clients"],
        "transport": spec["transport"],
        "window_s": round(window, 2),
        "completed": completed,
        "rps": answered / window,
        "p50_ms": search_bench.pct(latencies, 0.5),
        "p95_ms": search_bench.pct(latencies, 0.95),
        "p99_ms": search_bench.pct(latencies, 0.99),
        "outcomes": dict(sorted(outcomes.items())),
        "cpu_s": {key: round(value, 2) for key, value in cpu_s.items()},
        # Every completed request counts: a refused one cost the services CPU too.
        "cpu_ms_per_request": {
            key: round(value * 1000 / per_request, 1) for key, value in cpu_s.items()
        },
    }


# ---------------------------------------------------------------- the run


async def build_index(db_url: str, embedder_addr: str, args: argparse.Namespace) -> list[str]:
    """bench.search's index in `db_url`, embedded by the running embedder; the queries."""
    clock = time.perf_counter()
    nodes, docs = await search_bench.collect_corpus(
        args.nodes, args.docs, args.real, "spread", args.seed
    )
    async with signed_channel(embedder_addr) as channel:
        vectors = await search_bench.corpus_vectors(
            EmbedderClient(channel, timeout_s=2.0),
            nodes,
            docs,
            real=args.real,
            filler=args.filler,
            rng=np.random.default_rng(args.seed),
        )
    await migrate(db_url, "retrieval", MIGRATIONS)
    conn = await asyncpg.connect(db_url)
    try:
        await register_vector(conn)
        await search_bench.load(
            conn,
            nodes,
            docs,
            node_vectors=vectors.nodes,
            summary_vectors=vectors.summaries,
            doc_vectors=vectors.docs,
            seed=args.seed,
        )
        # What autovacuum would do after the bulk load (vacuum every table and its HNSW
        # indexes), done now: the measured windows are the steady state, not a vacuum.
        started = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE)")
        vacuum_s = time.perf_counter() - started
    finally:
        await conn.close()
    print(
        f"index: {len(nodes)} code nodes, {len(docs)} doc chunks, {vectors.embedded} "
        f"real embeddings ({time.perf_counter() - clock:.0f} s, VACUUM {vacuum_s:.1f} s)",
        flush=True,
    )
    return [q.text for q in search_bench.make_queries(nodes, vectors.real, args.queries, args.seed)]


async def start_service(
    supervisor: Supervisor, name: str, extra_env: dict[str, str]
) -> tuple[str, int]:
    """`python -m <name>` as `cograph up` starts it, on a port the OS picks; its address
    and pid once it is ready (health SERVING, or /healthz for the gateway)."""
    spec = next(s for s in SERVICES if s.name == name)
    child = supervisor.start(spec, 0, extra_env)
    await supervisor.wait_ready(READY_TIMEOUT_S, [child])
    if child.state != "ready" or child.pid is None:
        raise RuntimeError(f"{name} did not start: {child.fatal}\n{child.log_tail()}")
    return f"127.0.0.1:{child.port}", child.pid


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "nodes": args.nodes,
        "clients": args.clients,
        "filler": args.filler,
    }
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        workdir = Path(tmp)
        async with scratch_database("bench_throughput") as db_url:
            supervisor = Supervisor(
                workdir / "run",
                with_secret({**os.environ, "COGRAPH_LOG_LEVEL": "WARNING"}),
                ready_timeout_s=READY_TIMEOUT_S,
                report=Reporter(workdir / "run" / "up.log"),
            )
            try:
                common = {"COGRAPH_DATABASE_URL": db_url, "COGRAPH_DATA_DIR": str(workdir)}
                embedder, embedder_pid = await start_service(
                    supervisor,
                    "embedder",
                    {**common, "EMBEDDER_CACHE_DIR": str(search_bench.MODEL_CACHE)},
                )
                queries = await build_index(db_url, embedder, args)
                retrieval, retrieval_pid = await start_service(
                    supervisor, "retrieval", {**common, "EMBEDDER_ADDR": embedder}
                )
                gateway, gateway_pid = await start_service(
                    supervisor,
                    "gateway",
                    {
                        **common,
                        "EMBEDDER_ADDR": embedder,
                        "RETRIEVAL_ADDR": retrieval,
                        "GATEWAY_QUOTAS": "false",  # the service is measured, not the limiter
                    },
                )
                pool = await create_pool(db_url)
                try:
                    _, key = await KeysStore(pool).create(
                        "bench-throughput", search_bench.PRINCIPAL, False
                    )
                finally:
                    await pool.close()
                meter = Meter(
                    {"gateway": gateway_pid, "retrieval": retrieval_pid, "embedder": embedder_pid},
                    *await find_postmaster(db_url),
                )
                base = {
                    "url": f"http://{gateway}",
                    "key": key,
                    "queries": queries,
                    "warmup": args.warmup,
                    "seconds": args.seconds,
                }
                plan = {
                    "single": {"transport": "rest", "clients": 1},
                    "rest": {"transport": "rest", "clients": args.clients},
                    "mcp": {"transport": "mcp", "clients": args.clients},
                }
                for phase in args.phases:
                    report[phase] = await run_phase(phase, {**base, **plan[phase]}, meter, workdir)
                    print(f"{phase}: {json.dumps(report[phase])}", flush=True)
                report["restarts"] = {c.spec.name: c.restarts for c in supervisor.children}
            finally:
                await asyncio.wait_for(supervisor.stop(), STOP_TIMEOUT_S + 10)
    # The headline figures, at the top level where a script comparing runs looks for them.
    for phase, prefix in (("rest", "rest"), ("mcp", "mcp"), ("single", "single")):
        if phase in report:
            row = report[phase]
            report.update(
                {
                    f"{prefix}_rps": round(row["rps"], 2),
                    f"{prefix}_p50_ms": round(row["p50_ms"], 1),
                    f"{prefix}_p95_ms": round(row["p95_ms"], 1),
                    f"{prefix}_cpu_ms_per_request": row["cpu_ms_per_request"],
                }
            )
    report["load_average"] = os.getloadavg()
    return report


def print_report(report: dict[str, Any]) -> None:
    print()
    print(
        f"Search through the gateway, {report['nodes']} code nodes ({report['filler']} filler "
        "vectors), non-admin principal, "
        f"top_k {TOP_K}; per-key limits OFF (GATEWAY_QUOTAS=false: the service is measured, "
        "not the limiter); one client process, on the same cores as the services"
    )
    rows = [phase for phase in PHASES if phase in report]
    print(
        f"{'phase':8}{'clients':>8}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
        f"{'n':>6}  outcomes"
    )
    for phase in rows:
        row = report[phase]
        print(
            f"{phase:8}{row['clients']:>8}{row['rps']:>9.1f}{row['p50_ms']:>9.1f}"
            f"{row['p95_ms']:>9.1f}{row['p99_ms']:>9.1f}{row['completed']:>6}  {row['outcomes']}"
        )
    print("CPU ms per request (the measured window's CPU time over its completed requests):")
    names = list(report[rows[0]]["cpu_ms_per_request"]) if rows else []
    print(f"{'phase':8}" + "".join(f"{name:>11}" for name in names))
    for phase in rows:
        cost = report[phase]["cpu_ms_per_request"]
        print(f"{phase:8}" + "".join(f"{cost[name]:>11.1f}" for name in names))
    print(
        "(machine: every process on it, the benchmark's and anything else running; "
        f"{os.cpu_count()} cores; load average at the end "
        f"{', '.join(f'{v:.2f}' for v in report['load_average'])})"
    )
    if any(report.get("restarts", {}).values()):
        print(f"WARNING: services restarted during the run: {report['restarts']}")
    if "single" in report and "rest" in report:
        single, rest = report["single"], report["rest"]
        print(
            f"{rest['clients']} REST clients / 1: req/s x{rest['rps'] / single['rps']:.2f}, "
            f"p50 x{rest['p50_ms'] / single['p50_ms']:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20_000, help="code nodes to index")
    parser.add_argument("--docs", type=int, default=10_000, help="doc chunks to index")
    parser.add_argument("--real", type=int, default=1500, help="nodes with real embeddings")
    parser.add_argument(
        "--filler",
        choices=("random", "near"),
        default="random",
        help="vectors of the rows beyond --real: uniformly random (the worst case for HNSW), "
        "or noisy copies of the real ones (as bench.search)",
    )
    parser.add_argument("--queries", type=int, default=120, help="queries (3 kinds)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured, per phase")
    parser.add_argument("--warmup", type=float, default=5.0, help="load before each window")
    parser.add_argument(
        "--phases", default=",".join(PHASES), help=f"which of {', '.join(PHASES)}, in order"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--json",
        type=Path,
        help="also write the report here (top level: rest_rps, rest_p50_ms, rest_p95_ms, "
        "mcp_rps, mcp_p50_ms, mcp_p95_ms, single_p50_ms, <phase>_cpu_ms_per_request)",
    )
    parser.add_argument("--client", type=Path, help=argparse.SUPPRESS)  # the client process
    args = parser.parse_args()
    if args.client:
        result = asyncio.run(drive(json.loads(args.client.read_text())))
        print(json.dumps(result), flush=True)
        return
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    report = asyncio.run(run(args))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Embedder throughput and latency, over gRPC, against the raw model in the same run.

    python -m bench.embedder [--texts 512] [--backends onnx-int8,torch]
    python -m bench.embedder --slices 1,4,8,16,32 [--backends onnx-int8]

For each backend: the raw model's sentences/s (in-process, batched) and single-query latency;
then the service (a real `python -m embedder` process) called over gRPC by 1 and by 16
concurrent callers sending one text per request, the way retrieval and commons call it.
The ratio service/raw is the service's overhead (target: >= 0.85 with 16 callers).

--slices: how long one bulk-lane slice of N indexing chunks (2,000 characters, the
indexer's cut) takes in the raw model at 1 and at all threads, the figure behind
EMBEDDER_BULK_BATCH_TEXTS and EMBEDDER_BULK_THREADS (best of 3 runs per size).
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
from pathlib import Path

from bench.corpus import QUERIES, code_chunks
from bench.internal_auth import signed_channel, with_secret
from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from embedder.backends import load_backend

CACHE = Path(__file__).resolve().parent.parent / ".cograph" / "test-models"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def raw_figures(backend_name: str, texts: list[str], batch_size: int) -> tuple[float, float]:
    backend = load_backend(backend_name, None, CACHE)
    backend.encode(texts[:8], batch_size)
    start = time.perf_counter()
    backend.encode(texts, batch_size)
    throughput = len(texts) / (time.perf_counter() - start)
    latencies = []
    for i in range(50):
        t = time.perf_counter()
        backend.encode([QUERIES[i % len(QUERIES)]], 1)
        latencies.append((time.perf_counter() - t) * 1000)
    return throughput, statistics.median(latencies)


def slice_figures(backend_name: str, sizes: list[int]) -> None:
    chunks = code_chunks(max(sizes), chars=2000)
    print(f"bulk slice latency, chunks of 2,000 chars, {os.cpu_count()} cores, {backend_name}")
    print(f"{'texts':>5} {'threads':>7} {'ms':>8} {'ms/text':>8}")
    for threads in (1, 0):
        backend = load_backend(backend_name, None, CACHE, threads)
        backend.encode(chunks[:2], 8)
        for size in sizes:
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                backend.encode(chunks[:size], size)
                best = min(best, time.perf_counter() - t)
            label = threads or "all"
            print(f"{size:>5} {label:>7} {best * 1000:>8.0f} {best * 1000 / size:>8.1f}")


def start_service(backend_name: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = workdir / f"{backend_name}.port"
    env = with_secret(
        {
            **os.environ,
            "EMBEDDER_LISTEN": "127.0.0.1:0",
            "EMBEDDER_READY_FILE": str(ready),
            "EMBEDDER_BACKEND": backend_name,
            "EMBEDDER_CACHE_DIR": str(CACHE),
            "COGRAPH_LOG_LEVEL": "WARNING",
        }
    )
    process = subprocess.Popen([sys.executable, "-m", "embedder"], env=env)
    deadline = time.monotonic() + 180
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("embedder did not start")
        time.sleep(0.1)
    return process, f"127.0.0.1:{ready.read_text().strip()}"


async def service_figures(
    address: str, texts: list[str], callers: int
) -> tuple[float, float, float]:
    async with signed_channel(address) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        await stub.Embed(embedder_pb2.EmbedRequest(texts=texts[:8]), timeout=60)
        queue = list(texts)
        latencies: list[float] = []

        async def caller() -> None:
            while queue:
                text = queue.pop()
                t = time.perf_counter()
                await stub.Embed(embedder_pb2.EmbedRequest(texts=[text]), timeout=60)
                latencies.append((time.perf_counter() - t) * 1000)

        start = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        throughput = len(texts) / (time.perf_counter() - start)
    return throughput, percentile(latencies, 0.5), percentile(latencies, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backends", default="onnx-int8,torch")
    parser.add_argument("--slices", default="", help="bulk slice sizes to time, e.g. 1,4,8,16")
    args = parser.parse_args()
    if args.slices:
        for name in args.backends.split(","):
            slice_figures(name, [int(n) for n in args.slices.split(",")])
        return
    texts = code_chunks(args.texts)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.backends.split(","):
            raw_tps, raw_q = raw_figures(name, texts, args.batch_size)
            process, address = start_service(name, Path(tmp))
            try:
                for callers in (1, 16):
                    tps, p50, p95 = asyncio.run(service_figures(address, texts, callers))
                    rows.append((name, callers, raw_tps, raw_q, tps, tps / raw_tps, p50, p95))
            finally:
                process.terminate()
                process.wait(30)
    header = (
        f"{'backend':<10} {'callers':>7} {'raw s/s':>8} {'raw q ms':>8} "
        f"{'svc s/s':>8} {'svc/raw':>7} {'p50 ms':>7} {'p95 ms':>7}"
    )
    print(f"{len(texts)} code chunks of 600 chars, one text per request, {os.cpu_count()} cores")
    print(header)
    for name, callers, raw_tps, raw_q, tps, ratio, p50, p95 in rows:
        print(
            f"{name:<10} {callers:>7} {raw_tps:>8.1f} {raw_q:>8.2f} "
            f"{tps:>8.1f} {ratio:>7.2f} {p50:>7.2f} {p95:>7.2f}"
        )


if __name__ == "__main__":
    main()

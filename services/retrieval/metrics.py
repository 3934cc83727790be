"""Retrieval's own series: how searches' streams fared and how long they took, and what the
index jobs did. Labels are closed sets (streams, stores, job kinds and ends); never a
repository, a query or a principal.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from retrieval.search.engine import SearchOutcome
from svckit.metrics import LATENCY_BUCKETS, ServiceMetrics

# How a job's run ended: published (succeeded), given up (failed), handed back after a
# transient error (retried), stopped because another worker took its lease (taken_over),
# or failed without running because its workers kept dying (abandoned).
JOB_ENDS = ("succeeded", "failed", "retried", "taken_over", "abandoned")


class RetrievalMetrics:
    def __init__(self, metrics: ServiceMetrics) -> None:
        registry = metrics.registry
        self.streams = Counter(
            "cograph_retrieval_search_streams_total",
            "Searches by stream (vector, lexical, symbol) and how it fared (ok; unavailable: "
            "it failed or timed out and the answer went without it; skipped: not asked for "
            "or nothing to run it on).",
            ("stream", "state"),
            registry=registry,
        )
        self.stream_seconds = Histogram(
            "cograph_retrieval_search_stream_seconds",
            "Time each stream's query took in a search, by stream and store (code, "
            "repo_docs, md_collections).",
            ("stream", "store"),
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.search_seconds = Histogram(
            "cograph_retrieval_search_seconds",
            "Time a search took inside retrieval (streams, fusion, hydration, rerank, graph).",
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.jobs = Counter(
            "cograph_retrieval_index_jobs_total",
            "Index job runs that ended, by kind (repository, collection) and how: "
            "succeeded, failed, retried, taken_over, abandoned.",
            ("kind", "end"),
            registry=registry,
        )
        self.running = Gauge(
            "cograph_retrieval_index_jobs_running",
            "Index jobs this process is running now.",
            registry=registry,
        )
        self.files = Counter(
            "cograph_retrieval_indexed_files_total",
            "Files indexed (parsed and written), by job kind; its rate is files per second.",
            ("kind",),
            registry=registry,
        )
        self.embeddings = Counter(
            "cograph_retrieval_indexed_embeddings_total",
            "Chunks embedded by index jobs, by job kind; its rate is embeddings per second.",
            ("kind",),
            registry=registry,
        )

    def observe_search(self, outcome: SearchOutcome) -> None:
        for stream, state in outcome.streams.items():
            self.streams.labels(stream, state).inc()
        for label, ms in outcome.timings_ms.items():
            parts = label.split("/")
            if len(parts) == 3:  # a stream task's timing: stream/store/unit
                self.stream_seconds.labels(parts[0], parts[1]).observe(ms / 1000)
        total = outcome.timings_ms.get("total")
        if total is not None:
            self.search_seconds.observe(total / 1000)

    def job_ended(self, kind: str, end: str) -> None:
        self.jobs.labels(kind, end).inc()

    def progressed(self, kind: str, files: int, embeddings: int) -> None:
        if files > 0:
            self.files.labels(kind).inc(files)
        if embeddings > 0:
            self.embeddings.labels(kind).inc(embeddings)

    def watch_running(self, running: Callable[[], int]) -> None:
        self.running.set_function(lambda: float(running()))

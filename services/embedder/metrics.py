"""The embedder's own series: what its model calls hold, how long they run, and what waits.

"Busy" is the time a lane's inference thread spends in the model: its rate over a window is
the share of that window the lane was busy (1.0: the lane never idled), which says whether
the embedder, and not its callers, is the bottleneck.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from svckit.metrics import ServiceMetrics

LANES = ("query", "bulk")
# Texts per model call: 1 (a lone query) up to EMBEDDER_BATCH_SIZE (64 by default; at most
# 1024).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class EmbedderMetrics:
    def __init__(self, metrics: ServiceMetrics) -> None:
        registry = metrics.registry
        self.batch_texts = Histogram(
            "cograph_embedder_batch_texts",
            "Texts per model call, by lane (query: searches; bulk: indexing, re-embedding).",
            ("lane",),
            registry=registry,
            buckets=BATCH_BUCKETS,
        )
        self.busy = Counter(
            "cograph_embedder_busy_seconds_total",
            "Seconds each lane's inference thread spent in the model; its rate is the "
            "lane's busy share (0 to 1).",
            ("lane",),
            registry=registry,
        )
        self.queued = Gauge(
            "cograph_embedder_queue_texts",
            "Texts waiting in each lane for the model (the bulk lane holds at most "
            "EMBEDDER_BULK_QUEUE_TEXTS).",
            ("lane",),
            registry=registry,
        )
        for lane in LANES:  # present from the start, at zero, so rates have a baseline
            self.batch_texts.labels(lane)
            self.busy.labels(lane)

    def observe_batch(self, lane: str, texts: int, seconds: float) -> None:
        self.batch_texts.labels(lane).observe(texts)
        self.busy.labels(lane).inc(seconds)

    def watch_queues(self, queued_texts: Callable[[str], int]) -> None:
        """Reads each lane's queue when scraped (`queued_texts(lane)`: Batcher's)."""
        for lane in LANES:
            self.queued.labels(lane).set_function(_reader(queued_texts, lane))


def _reader(queued_texts: Callable[[str], int], lane: str) -> Callable[[], float]:
    return lambda: float(queued_texts(lane))

"""svckit.metrics and the services' own series: settings at their edges, what each series
counts, and what the /metrics endpoint answers (pure logic: no socket, no database)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import numpy as np
import pytest
from prometheus_client import Gauge

from embedder.batcher import Batcher
from embedder.metrics import EmbedderMetrics
from retrieval.indexing.jobs import Job, JobManager
from retrieval.metrics import RetrievalMetrics
from retrieval.search.engine import SearchOutcome
from svckit import metrics as svc_metrics
from svckit.config import ConfigError, Env
from svckit.metrics import (
    MetricsEndpoint,
    MetricsSettings,
    ServiceMetrics,
    parse_listen,
    split_method,
)

NAME = "RETRIEVAL_METRICS_LISTEN"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("[::1]:9464", ("::1", 9464)),
        ("metrics.internal:9464", ("metrics.internal", 9464)),
    ],
)
def test_a_listen_address_is_host_and_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(NAME, value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "9464",  # no host
        ":9464",
        "127.0.0.1:65536",  # one past the last port
        "127.0.0.1:-1",
        "127.0.0.1:http",
        "127.0.0.1:",
        "evil host:80",
        "a/b:80",
        "[::1:80",
        "ho\nst:80",
    ],
)
def test_a_bad_listen_address_stops_the_start_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match=NAME):
        parse_listen(NAME, value)


def test_metrics_settings_default_to_a_free_local_port_and_can_be_turned_off() -> None:
    assert MetricsSettings.from_env(Env({}), "retrieval") == MetricsSettings("127.0.0.1:0")
    assert MetricsSettings.from_env(Env({NAME: "off"}), "retrieval") == MetricsSettings()
    given = MetricsSettings.from_env(
        Env({NAME: "0.0.0.0:9464", "RETRIEVAL_METRICS_FILE": "/run/r.metrics"}), "retrieval"
    )
    assert given == MetricsSettings("0.0.0.0:9464", Path("/run/r.metrics"))
    with pytest.raises(ConfigError, match=NAME):
        MetricsSettings.from_env(Env({NAME: "0.0.0.0:99999"}), "retrieval")


def test_rpcs_are_counted_by_service_method_and_code() -> None:
    metrics = ServiceMetrics()
    method = "/cograph.retrieval.v1.RetrievalService/Search"
    assert split_method(method) == ("cograph.retrieval.v1.RetrievalService", "Search")
    metrics.rpcs.observe(method, grpc.StatusCode.OK, 0.02)
    metrics.rpcs.observe(method, grpc.StatusCode.OK, 0.2)
    metrics.rpcs.observe(method, grpc.StatusCode.INVALID_ARGUMENT, 0.001)
    labels = {"grpc_service": "cograph.retrieval.v1.RetrievalService", "grpc_method": "Search"}
    sample = metrics.registry.get_sample_value
    assert sample("cograph_grpc_server_handled_total", {**labels, "grpc_code": "OK"}) == 2
    assert (
        sample("cograph_grpc_server_handled_total", {**labels, "grpc_code": "INVALID_ARGUMENT"})
        == 1
    )
    assert sample(
        "cograph_grpc_server_handling_seconds_bucket", {**labels, "grpc_code": "OK", "le": "0.025"}
    ) == pytest.approx(1)


def test_two_services_in_one_process_never_share_counters() -> None:
    one, two = ServiceMetrics(), ServiceMetrics()
    one.rpcs.observe("/s.S/M", grpc.StatusCode.OK, 0.01)
    labels = {"grpc_service": "s.S", "grpc_method": "M", "grpc_code": "OK"}
    assert one.registry.get_sample_value("cograph_grpc_server_handled_total", labels) == 1
    assert two.registry.get_sample_value("cograph_grpc_server_handled_total", labels) is None


class _FakePool:
    acquire_observer: Any = None

    def get_size(self) -> int:
        return 5

    def get_idle_size(self) -> int:
        return 2

    def get_max_size(self) -> int:
        return 10


def test_pool_waits_and_connections_are_by_pool_name() -> None:
    metrics = ServiceMetrics()
    pool = _FakePool()
    metrics.pools.watch(pool, "requests")
    pool.acquire_observer(0.003, False)
    pool.acquire_observer(5.0, True)
    sample = metrics.registry.get_sample_value
    ok = {"pool": "requests", "outcome": "ok"}
    assert sample("cograph_db_pool_acquire_seconds_count", ok) == 1
    assert sample("cograph_db_pool_acquire_seconds_count", {**ok, "outcome": "timeout"}) == 1
    assert sample("cograph_db_pool_connections", {"pool": "requests", "state": "in_use"}) == 3
    assert sample("cograph_db_pool_connections", {"pool": "requests", "state": "max"}) == 10


def _answer(endpoint: MetricsEndpoint, request: bytes) -> bytes:
    return asyncio.run(endpoint._answer(request))


def test_the_endpoint_answers_get_metrics_alone() -> None:
    metrics = ServiceMetrics()
    metrics.rpcs.observe("/s.S/M", grpc.StatusCode.OK, 0.01)
    endpoint = MetricsEndpoint(metrics, "127.0.0.1:0")
    ok = _answer(endpoint, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b'cograph_grpc_server_handled_total{grpc_code="OK",grpc_method="M"' in ok
    with_query = _answer(endpoint, b"GET /metrics?name[]=x HTTP/1.1\r\n\r\n")
    assert with_query.startswith(b"HTTP/1.1 200")
    head = _answer(endpoint, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
    assert _answer(endpoint, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert _answer(endpoint, b"GET /metrics/../x HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
    refused = _answer(endpoint, b"POST /metrics HTTP/1.1\r\n\r\n")
    assert refused.startswith(b"HTTP/1.1 405") and b"Allow: GET" in refused
    assert _answer(endpoint, b"\x16\x03\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _answer(endpoint, b"GET /metrics\r\n\r\n").startswith(b"HTTP/1.1 400")


def test_a_failing_or_slow_refresher_leaves_its_last_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(svc_metrics, "REFRESH_TIMEOUT_S", 0.05)
    metrics = ServiceMetrics()
    gauge = Gauge("backlog", "test", registry=metrics.registry)
    calls: list[str] = []

    async def ok() -> None:
        calls.append("ok")
        gauge.set(7)

    async def broken() -> None:
        raise RuntimeError("database away")

    async def stuck() -> None:
        await asyncio.sleep(10)

    metrics.refreshers.extend([ok, broken, stuck])
    body = asyncio.run(metrics.exposition())
    assert calls == ["ok"]
    assert b"backlog 7.0" in body


def test_embedder_batches_busy_time_and_queues_by_lane() -> None:
    metrics = ServiceMetrics()
    embedder = EmbedderMetrics(metrics)

    async def run() -> None:
        batcher = Batcher(
            lambda texts: np.zeros((len(texts), 2), dtype=np.float32),
            max_texts=8,
            max_wait_s=0.0,
            observer=embedder.observe_batch,
        )
        embedder.watch_queues(batcher.queued_texts)
        batcher.start()
        try:
            await batcher.embed(["a", "b", "c"])
            await batcher.embed(["d"] * 5, bulk=True)
        finally:
            await batcher.close()

    asyncio.run(run())
    sample = metrics.registry.get_sample_value
    assert sample("cograph_embedder_batch_texts_count", {"lane": "query"}) == 1
    assert sample("cograph_embedder_batch_texts_sum", {"lane": "query"}) == 3
    assert sample("cograph_embedder_batch_texts_sum", {"lane": "bulk"}) == 5
    assert (sample("cograph_embedder_busy_seconds_total", {"lane": "query"}) or 0) > 0
    assert sample("cograph_embedder_queue_texts", {"lane": "bulk"}) == 0


def test_search_streams_are_counted_by_state_and_timed_by_store() -> None:
    metrics = ServiceMetrics()
    retrieval = RetrievalMetrics(metrics)
    outcome = SearchOutcome(
        "ParseConfig",
        [],
        {"vector": "unavailable", "lexical": "ok", "symbol": "skipped"},
        timings_ms={
            "lexical/code/chunk": 12.0,
            "lexical/repo_docs/doc": 3.0,
            "streams": 15.0,
            "total": 30.0,
        },
    )
    retrieval.observe_search(outcome)
    sample = metrics.registry.get_sample_value
    streams = "cograph_retrieval_search_streams_total"
    assert sample(streams, {"stream": "vector", "state": "unavailable"}) == 1
    assert sample(streams, {"stream": "symbol", "state": "skipped"}) == 1
    timed = "cograph_retrieval_search_stream_seconds_sum"
    assert sample(timed, {"stream": "lexical", "store": "code"}) == pytest.approx(0.012)
    assert sample("cograph_retrieval_search_seconds_count") == 1


def test_index_progress_is_reported_as_it_grows_never_twice() -> None:
    metrics = ServiceMetrics()
    retrieval = RetrievalMetrics(metrics)
    jobs = JobManager(SimpleNamespace(), observer=retrieval)  # the pool is never used
    job = Job("j1", "repository", "github.com/acme/billing")
    job.progress.files_done, job.progress.embeddings_done = 10, 40
    jobs._report_progress(job)
    job.progress.files_done, job.progress.embeddings_done = 15, 40
    jobs._report_progress(job)
    jobs._report_progress(job)  # nothing new
    jobs._ended(job, "succeeded")
    sample = metrics.registry.get_sample_value
    assert sample("cograph_retrieval_indexed_files_total", {"kind": "repository"}) == 15
    assert sample("cograph_retrieval_indexed_embeddings_total", {"kind": "repository"}) == 40
    ended = {"kind": "repository", "end": "succeeded"}
    assert sample("cograph_retrieval_index_jobs_total", ended) == 1

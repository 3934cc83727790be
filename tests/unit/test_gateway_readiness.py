"""/readyz's verdict from its dependencies' health: ready, degraded or not ready."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest

from gateway.metrics import Metrics, SearchHealth
from gateway.routes_health import readiness


def test_everything_serving_is_ready() -> None:
    status, body = readiness({"retrieval": "serving", "database": "serving", "embedder": "serving"})
    assert status == 200 and body["status"] == "ready"


def test_embedder_down_is_degraded_but_still_200() -> None:
    status, body = readiness(
        {"retrieval": "serving", "database": "serving", "embedder": "unavailable"}
    )
    assert status == 200
    assert body["status"] == "degraded" and body["degraded"] == ["embedder"]
    assert body["dependencies"]["embedder"] == "unavailable"


def test_database_or_a_backend_down_is_not_ready() -> None:
    for down in ("database", "retrieval"):
        statuses = {"retrieval": "serving", "database": "serving", "embedder": "serving"}
        statuses[down] = "deadline_exceeded"
        status, body = readiness(statuses)
        assert status == 503
        assert body["status"] == "not_ready" and body["error"] == "unavailable"
        assert body["detail"] == f"not ready: {down}"


def test_searches_that_lost_their_vector_recently_make_it_degraded_with_counts() -> None:
    now = [1000.0]
    health = SearchHealth(60.0, clock=lambda: now[0])
    serving = {"retrieval": "serving", "database": "serving", "embedder": "serving"}
    assert readiness(serving, search=health)[1]["status"] == "ready"
    health.lost_vector("code")
    health.lost_vector("code")
    health.lost_vector("notes")
    status, body = readiness(serving, search=health)
    assert status == 200  # still serving, with worse answers
    assert body["status"] == "degraded" and body["degraded"] == ["search"]
    assert body["dependencies"]["search"] == "vector_stream_unavailable"
    assert body["detail"] == (
        "degraded: search: in the last 60 s, 2 code searches without their vector stream, "
        "1 note searches 503 semantic_search_unavailable"
    )
    now[0] += 60.0  # at the window's edge: still counted
    assert readiness(serving, search=health)[1]["status"] == "degraded"
    now[0] += 0.001  # past it: forgotten
    assert readiness(serving, search=health)[1]["status"] == "ready"


def test_search_degraded_does_not_hide_a_required_dependency_down() -> None:
    health = SearchHealth(60.0)
    health.lost_vector("notes")
    status, body = readiness(
        {"retrieval": "serving", "database": "unavailable", "embedder": "serving"},
        search=health,
    )
    assert status == 503 and body["detail"] == "not ready: database"
    assert body["dependencies"]["search"] == "vector_stream_unavailable"


def test_metrics_count_code_searches_without_vector_and_note_search_503s() -> None:
    metrics = Metrics()
    metrics.count_degraded_search({"vector": "unavailable", "lexical": "ok"})
    metrics.count_degraded_search({"lexical": "unavailable"})  # the vector made it
    metrics.count_semantic_search_unavailable()
    assert metrics.search_health.recent() == {"code": 1, "notes": 1}
    scrape = generate_latest(metrics.registry).decode()
    assert 'cograph_gateway_searches_without_vector_recent{kind="code"} 1.0' in scrape
    assert 'cograph_gateway_searches_without_vector_recent{kind="notes"} 1.0' in scrape
    assert "cograph_gateway_semantic_search_unavailable_total 1.0" in scrape

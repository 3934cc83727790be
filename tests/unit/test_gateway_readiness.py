"""/readyz's verdict from its dependencies' health: ready, degraded or not ready."""

from __future__ import annotations

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

"""The access log's pure parts: the reason a refusal's body gives, bounded, and the route
template of a request that no route served."""

from __future__ import annotations

import json

from starlette.routing import Route

from gateway.access_log import (
    MAX_REASON_CHARS,
    UNMATCHED,
    refusal_reason,
    route_template,
)


def test_refusal_reason_reads_the_error_document_and_bounds_the_detail() -> None:
    body = json.dumps({"error": "unauthenticated", "detail": "invalid or revoked API key"})
    assert refusal_reason(body.encode()) == ("unauthenticated", "invalid or revoked API key")
    long = json.dumps({"error": "permission_denied", "detail": "x" * (MAX_REASON_CHARS + 1)})
    assert refusal_reason(long.encode())[1] == "x" * MAX_REASON_CHARS
    for junk in (b"", b"\xff\xfe", b"not json", b"[1, 2]", b'{"error": 3, "detail": null}'):
        assert refusal_reason(junk) == ("", "")


def _endpoint() -> None:
    return None


def test_route_template_prefers_the_served_route_then_matches_then_unmatched() -> None:
    routes = [
        Route("/api/repositories/{slug:path}/refs", _endpoint, methods=["GET"]),
        Route("/api/repositories/{slug:path}", _endpoint, methods=["GET", "DELETE"]),
    ]

    def scope(path: str, method: str = "GET") -> dict[str, object]:
        return {"type": "http", "path": path, "method": method, "root_path": ""}

    served = {**scope("/api/keys"), "route": Route("/api/keys", _endpoint)}
    assert route_template(served, routes) == "/api/keys"
    assert route_template({**scope("/x"), "route": "quota:search"}, routes) == "quota:search"
    refs = scope("/api/repositories/github.com/acme/app/refs")
    assert route_template(refs, routes) == "/api/repositories/{slug:path}/refs"
    # A method the route does not take still names the route that was asked for.
    posted = scope("/api/repositories/acme%2Fsecret", "POST")
    assert route_template(posted, routes) == "/api/repositories/{slug:path}"
    assert route_template(scope("/nowhere/cg_secret"), routes) == UNMATCHED

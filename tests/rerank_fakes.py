"""Local fake rerank servers that follow the vendors' documented formats, over real HTTP.

Cohere  POST /v2/rerank {model, query, documents, top_n}
        -> {id, results: [{index, relevance_score}], meta}
Voyage  POST /v1/rerank {query, documents, model, top_k}
        -> {object, data: [{index, relevance_score}], model, usage}
Jina    POST /v1/rerank {model, query, documents, top_n}
        -> {model, usage, results: [{index, relevance_score}]}

Scores are word overlap with the query, so tests can predict the order. Results come back
sorted by relevance (as the vendors do), truncated to top_n / top_k.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "test-key"
_PATHS = {"cohere": "/v2/rerank", "voyage": "/v1/rerank", "jina": "/v1/rerank"}


def overlap(query: str, document: str) -> float:
    words = set(re.findall(r"\w+", query.lower()))
    found = set(re.findall(r"\w+", document.lower()))
    return len(words & found) / max(1, len(words))


@dataclass
class FakeVendor:
    vendor: str
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None  # answer this HTTP status instead
    garbage: bool = False  # answer 200 with a body that is not the documented shape


def _reply(vendor: str, body: dict[str, Any]) -> dict[str, Any]:
    documents = body["documents"]
    scored = sorted(
        (
            {"index": i, "relevance_score": overlap(body["query"], d)}
            for i, d in enumerate(documents)
        ),
        key=lambda item: -float(item["relevance_score"]),
    )
    if vendor == "cohere":
        limit = body.get("top_n") or len(documents)
        return {
            "id": "fake",
            "results": scored[:limit],
            "meta": {"billed_units": {"search_units": 1}},
        }
    if vendor == "voyage":
        limit = body.get("top_k") or len(documents)
        return {
            "object": "list",
            "data": scored[:limit],
            "model": body["model"],
            "usage": {"total_tokens": 10},
        }
    limit = body.get("top_n") or len(documents)
    return {"model": body["model"], "usage": {"total_tokens": 10}, "results": scored[:limit]}


@contextmanager
def fake_vendor(vendor: str) -> Iterator[FakeVendor]:
    state = FakeVendor(vendor)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if self.path != _PATHS[vendor]:
                self._send(404, {"message": "not found"})
            elif self.headers.get("Authorization") != f"Bearer {API_KEY}":
                self._send(401, {"message": "invalid api token"})
            elif not body.get("model") or not isinstance(body.get("documents"), list):
                self._send(400, {"message": "model and documents are required"})
            elif state.fail_with is not None:
                self._send(state.fail_with, {"message": "injected failure"})
            elif state.garbage:
                self._send(200, {"unexpected": True})
            else:
                self._send(200, _reply(vendor, body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits for the loop's next poll: 0.5 s by default, for every test.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

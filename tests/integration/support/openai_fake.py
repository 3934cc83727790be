"""A local server that speaks the OpenAI embeddings protocol (POST /v1/embeddings), for the
embedder's `openai` backend: deterministic vectors of `dimension` numbers from each text's
sha256, answered out of order (the protocol orders by `index`), a bearer key checked when
one is given, a 500 on the text "please fail", and every request kept for assertions."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fake_vector(text: str, dimension: int) -> list[float]:
    """Deterministic, not normalised (the backend must normalise)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:dimension]]


class FakeEmbeddingsEndpoint:
    def __init__(self, dimension: int, key: str | None = None) -> None:
        self.dimension = dimension
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(body)
                endpoint.auth.append(self.headers.get("Authorization"))
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "no such route"}})
                if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                    return self._send(401, {"error": {"message": "bad key"}})
                if any(text == "please fail" for text in body["input"]):
                    return self._send(500, {"error": {"message": "model crashed"}})
                data = [
                    {"object": "embedding", "embedding": fake_vector(t, dimension), "index": i}
                    for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the protocol orders by `index`, not by position
                self._send(200, {"object": "list", "data": data, "model": body["model"]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        # shutdown() waits for the loop's next poll: 0.5 s by default.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeEmbeddingsEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

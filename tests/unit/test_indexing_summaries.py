"""Summarizers: the extractive default, and the OpenAI-compatible client against a local
fake server that speaks the documented chat-completions format."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from retrieval.indexing.summaries import (
    ExtractiveSummarizer,
    OpenAISummarizer,
    SummaryInput,
    extractive_summary,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

ITEM = SummaryInput(
    qualified_name="billing.retry.retry_charge",
    kind="function",
    language="python",
    signature="def retry_charge(charge: Charge, attempts: int = 3) -> bool:",
    docstring="Retry a failed charge with backoff. Gives up after attempts.",
    body="def retry_charge(charge, attempts=3):\n    return backoff(charge)\n",
    calls=("backoff", "log.warning", "backoff"),
)


async def test_extractive_summary() -> None:
    assert extractive_summary(ITEM) == (
        "python function billing.retry.retry_charge. Retry a failed charge with backoff. "
        "Signature: def retry_charge(charge: Charge, attempts: int = 3) -> bool: "
        "Calls: backoff, log.warning."
    )
    module = SummaryInput("billing", "module", "python", "billing.py", None, "", (), ("A", "b"))
    assert extractive_summary(module) == "python module billing. Defines: A, b."
    # The second definition of a name is summarised under the name the source writes.
    second = replace(ITEM, qualified_name="billing.retry.retry_charge#2")
    assert extractive_summary(second) == extractive_summary(ITEM)


async def test_extractive_summarizer_keeps_order() -> None:
    other = SummaryInput("x.y", "class", "go", "type y struct", None, "")
    summaries = await ExtractiveSummarizer().summarize([ITEM, other])
    assert summaries[1] == "go class x.y. Signature: type y struct"


class _FakeChat(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    headers_seen: list[str | None]
    fail_on: str | None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, "body": body})
        self.headers_seen.append(self.headers.get("Authorization"))
        user = body["messages"][-1]["content"]
        if self.fail_on and self.fail_on in user:
            self.send_response(500)
            self.end_headers()
            return
        name = next(line for line in user.splitlines() if line.startswith("Name: "))[6:]
        reply = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"  Summary of\n{name}.  "},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def fake_server() -> Iterator[tuple[str, type[_FakeChat]]]:
    handler = type("Handler", (_FakeChat,), {"requests": [], "headers_seen": [], "fail_on": None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # shutdown() waits for the loop's next poll: 0.5 s by default, for every test.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


async def test_openai_provider_speaks_chat_completions(
    fake_server: tuple[str, type[_FakeChat]],
) -> None:
    url, handler = fake_server
    summarizer = OpenAISummarizer(url + "/", "local-model", "sk-test", concurrency=2)
    other = SummaryInput("x.y", "class", "go", "type y struct", None, "type y struct {}")
    try:
        summaries = await summarizer.summarize([ITEM, other])
    finally:
        await summarizer.close()
    assert summaries == ["Summary of billing.retry.retry_charge.", "Summary of x.y."]
    assert {r["path"] for r in handler.requests} == {"/v1/chat/completions"}
    body = handler.requests[0]["body"]
    assert body["model"] == "local-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert handler.headers_seen == ["Bearer sk-test", "Bearer sk-test"]


async def test_openai_failures_fall_back_to_extractive(
    fake_server: tuple[str, type[_FakeChat]],
) -> None:
    url, handler = fake_server
    handler.fail_on = "retry_charge"
    summarizer = OpenAISummarizer(url, "m")
    try:
        (summary,) = await summarizer.summarize([ITEM])
    finally:
        await summarizer.close()
    assert summary == extractive_summary(ITEM)
    assert summarizer.failures == 1
    assert handler.headers_seen == [None]  # no key configured, no header sent

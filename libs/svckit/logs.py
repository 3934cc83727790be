"""Structured JSON logging with the request id and trace id on every line."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from opentelemetry import trace

from svckit.requestctx import current_request_id

# Attributes every LogRecord has; anything else was passed through `extra=` and is emitted.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line, so logs can be shipped and queried without parsing rules."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # A record may carry its request id (set where it was made); else take the context's.
        request_id = record.__dict__.get("request_id") or current_request_id()
        if request_id:
            entry["request_id"] = request_id
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry["trace_id"] = format(span.trace_id, "032x")
            entry["span_id"] = format(span.span_id, "016x")
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(service: str, level: str = "INFO") -> None:
    """Routes the root logger to stderr as JSON; idempotent so tests can call it freely."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_cograph", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    handler._cograph = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())

"""Structured JSON logging with the request id and trace id on every line; repeated
warnings rate-limited; size-rotated log files for `cograph up`.

Every line is JSON and nothing else: Python warnings are logged as records instead of
printed, terminal escape codes are taken out of messages and fields (uvicorn adds a
coloured copy of its messages), libraries' chatter is kept below the level written (the
MCP transport's line per HTTP request, onnxruntime's line per quantised tensor).

A warning that repeats per request (a degraded search, say) is written at most once per
COGRAPH_LOG_REPEAT_WINDOW_S per message, and the next one written says how many were left
out (`suppressed`): the log keeps the news without filling the disk. Files `cograph up`
writes rotate at COGRAPH_LOG_MAX_BYTES, keeping COGRAPH_LOG_BACKUPS older ones.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace

from svckit.config import Env
from svckit.requestctx import current_request_id


@dataclass(frozen=True)
class LogSettings:
    """How much log a process keeps: rotation of the files `cograph up` writes, and the
    window in which one repeated warning is written once."""

    max_bytes: int = 10 * 1024 * 1024
    backups: int = 5
    repeat_window_s: float = 60.0  # 0: every repeat is written

    @classmethod
    def from_env(cls, env: Env) -> LogSettings:
        return cls(
            max_bytes=env.int("COGRAPH_LOG_MAX_BYTES", cls.max_bytes, min=64 * 1024, max=2**40),
            backups=env.int("COGRAPH_LOG_BACKUPS", cls.backups, min=1, max=100),
            repeat_window_s=env.float(
                "COGRAPH_LOG_REPEAT_WINDOW_S", cls.repeat_window_s, min=0.0, max=86_400.0
            ),
        )


class RepeatFilter(logging.Filter):
    """Lets one record per (logger, level, message template) through per window; the next
    one let through carries `suppressed`, the count left out since. Records below
    `min_level` (info, debug) always pass: they are not what floods a log."""

    # Distinct messages remembered; the oldest is forgotten beyond this, so memory stays
    # bounded whatever the messages are (its next repeat is then simply written).
    MAX_KEYS = 1024

    def __init__(
        self,
        window_s: float,
        *,
        min_level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._window_s = window_s
        self._min_level = min_level
        self._clock = clock
        # key -> [when last written, how many left out since]
        self._seen: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if self._window_s <= 0 or record.levelno < self._min_level:
            return True
        # A Python warning's record is always "%s" % (the warning): its text is the key.
        message = record.getMessage() if record.name == "py.warnings" else str(record.msg)
        key = (record.name, record.levelno, message)
        now = self._clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self._window_s:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.suppressed = int(seen[1])
        self._seen[key] = [now, 0]
        self._seen.move_to_end(key)
        while len(self._seen) > self.MAX_KEYS:
            self._seen.popitem(last=False)
        return True


# Attributes every LogRecord has; anything else was passed through `extra=` and is emitted.
# `color_message` is uvicorn's copy of its message with terminal colours: never emitted.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",
}

# ECMA-48 escape sequences (colours, cursor moves) and bare carriage returns: what a
# terminal interprets and a log file only stores as noise.
_TERMINAL_CODES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\r")

# Libraries' loggers that say at INFO what is routine: the MCP transport logs a line per
# stateless HTTP request ("Terminating session: None") and each session id it creates.
QUIET_LOGGERS: dict[str, int] = {
    "mcp.server.streamable_http": logging.WARNING,
    "mcp.server.streamable_http_manager": logging.WARNING,
    "httpx": logging.WARNING,
}


def plain_text(text: str) -> str:
    """`text` without terminal escape codes or carriage returns."""
    return _TERMINAL_CODES.sub("", text)


def _plain(value: Any) -> Any:
    return plain_text(value) if isinstance(value, str) else value


class LibraryRootFilter(logging.Filter):
    """Drops records below WARNING logged on the root logger itself (`logging.info(...)`):
    only libraries do that (the service's own modules log under their names), and
    onnxruntime's quantiser writes one such line per tensor when the embedder exports its
    model."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "root" or record.levelno >= logging.WARNING


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
            "msg": plain_text(record.getMessage()),
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
                entry[key] = _plain(value)
        if record.exc_info:
            entry["exc"] = plain_text(self.formatException(record.exc_info))
        return json.dumps(entry, default=str)


def configure_logging(
    service: str, level: str = "INFO", settings: LogSettings | None = None
) -> None:
    """Routes the root logger to stderr as JSON, repeated warnings rate-limited, Python
    warnings included; idempotent so tests can call it freely."""
    settings = settings or LogSettings()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_cograph", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    handler.addFilter(LibraryRootFilter())
    handler.addFilter(RepeatFilter(settings.repeat_window_s))
    handler._cograph = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name, quiet_level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(quiet_level)
    # warnings.warn() would print two lines of plain text to stderr; as records (logger
    # py.warnings) they are JSON, and the repeat filter writes each one once per window.
    logging.captureWarnings(True)


class RotatingLog:
    """An append-only text file rotated by size (name.log -> name.log.1 -> ...), for the
    output `cograph up` keeps of each service and of itself. Lines are written as they
    come, already formatted."""

    def __init__(self, path: Path, settings: LogSettings) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=settings.max_bytes, backupCount=settings.backups, encoding="utf-8"
        )
        self._handler.terminator = ""  # lines keep their own newline
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def write(self, line: str) -> None:
        """Writes one line (with its newline), rotating first when it would not fit."""
        record = logging.LogRecord("cograph", logging.INFO, "", 0, line, None, None)
        self._handler.handle(record)

    def close(self) -> None:
        self._handler.close()

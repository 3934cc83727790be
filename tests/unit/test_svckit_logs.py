"""Repeated warnings are written once per window with a count of those left out; the
files `cograph up` writes rotate by size; the settings have their bounds."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from svckit.config import ConfigError, Env
from svckit.logs import JsonFormatter, LogSettings, RepeatFilter, RotatingLog


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _logger(window_s: float, clock: _Clock) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("test"))
    handler.addFilter(RepeatFilter(window_s, clock=clock))
    logger = logging.getLogger(f"test.repeat.{id(out)}")
    logger.propagate = False
    logger.handlers = [handler]
    logger.setLevel(logging.DEBUG)
    return logger, out


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_repeated_warning_is_written_once_per_window_then_with_its_count() -> None:
    clock = _Clock()
    logger, out = _logger(10.0, clock)
    for n in range(100):  # one per degraded search, each with its own error text
        clock.now = 1000.0 + n * 0.05  # 5 s in all: inside the window
        logger.warning("semantic search unavailable", extra={"error": f"timeout {n}"})
    assert [line["msg"] for line in _lines(out)] == ["semantic search unavailable"]
    assert "suppressed" not in _lines(out)[0]

    clock.now = 1010.0  # the window (10 s from the first) is over at exactly 10 s
    logger.warning("semantic search unavailable", extra={"error": "again"})
    written = _lines(out)
    assert len(written) == 2
    assert written[1]["suppressed"] == 99 and written[1]["error"] == "again"

    # Nothing was left out since: the next one, a window later, carries no count.
    clock.now = 1020.0
    logger.warning("semantic search unavailable")
    assert "suppressed" not in _lines(out)[2]


def test_the_window_edge_and_distinct_messages_and_levels() -> None:
    clock = _Clock()
    logger, out = _logger(10.0, clock)
    logger.warning("a")
    clock.now = 1009.999
    logger.warning("a")  # just inside: left out
    logger.warning("b")  # another message: its own window
    logger.error("a")  # another level: its own window
    logger.info("a")  # info is never rate-limited
    logger.info("a")
    clock.now = 1010.0  # exactly 10 s after the first "a": written again
    logger.warning("a")
    msgs = [(line["level"], line["msg"], line.get("suppressed")) for line in _lines(out)]
    assert msgs == [
        ("warning", "a", None),
        ("warning", "b", None),
        ("error", "a", None),
        ("info", "a", None),
        ("info", "a", None),
        ("warning", "a", 1),
    ]


def test_window_zero_writes_every_repeat_and_keys_are_bounded() -> None:
    clock = _Clock()
    logger, out = _logger(0.0, clock)
    for _ in range(5):
        logger.warning("same")
    assert len(_lines(out)) == 5

    limited = RepeatFilter(60.0, clock=clock)
    for n in range(RepeatFilter.MAX_KEYS + 10):
        record = logging.LogRecord("x", logging.WARNING, "", 0, f"message {n}", None, None)
        assert limited.filter(record)
    assert len(limited._seen) == RepeatFilter.MAX_KEYS


def test_rotating_log_rotates_by_size_and_keeps_the_backups(tmp_path: Path) -> None:
    settings = LogSettings(max_bytes=64 * 1024, backups=2)
    path = tmp_path / "run" / "svc.log"
    sink = RotatingLog(path, settings)
    line = "x" * 1023 + "\n"  # 1 KiB
    for _ in range(63):  # 1 KiB short of the limit: no rotation yet
        sink.write(line)
    assert path.stat().st_size == 63 * 1024
    assert not (tmp_path / "run" / "svc.log.1").exists()
    sink.write(line)  # would reach it: rotated first (a file stays below max_bytes)
    assert (tmp_path / "run" / "svc.log.1").stat().st_size == 63 * 1024
    assert path.stat().st_size == 1024
    for _ in range(64 * 4):
        sink.write(line)
    sink.close()
    files = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert files == ["svc.log", "svc.log.1", "svc.log.2"]  # older ones are dropped
    total = sum(p.stat().st_size for p in (tmp_path / "run").iterdir())
    assert total <= 3 * 64 * 1024


def test_log_settings_bounds() -> None:
    assert LogSettings.from_env(Env({})) == LogSettings()
    edge = Env(
        {
            "COGRAPH_LOG_MAX_BYTES": str(64 * 1024),
            "COGRAPH_LOG_BACKUPS": "1",
            "COGRAPH_LOG_REPEAT_WINDOW_S": "0",
        }
    )
    assert LogSettings.from_env(edge) == LogSettings(64 * 1024, 1, 0.0)
    for name, value in (
        ("COGRAPH_LOG_MAX_BYTES", str(64 * 1024 - 1)),
        ("COGRAPH_LOG_BACKUPS", "0"),
        ("COGRAPH_LOG_BACKUPS", "101"),
        ("COGRAPH_LOG_REPEAT_WINDOW_S", "-1"),
    ):
        with pytest.raises(ConfigError, match=name):
            LogSettings.from_env(Env({name: value}))

"""Every line a service writes is one JSON object and nothing else: no terminal escape
codes (uvicorn's coloured copy of its messages, a progress bar's carriage returns), Python
warnings as records, libraries' routine chatter below the level written."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator

import pytest

from svckit.logs import QUIET_LOGGERS, JsonFormatter, LogSettings, configure_logging, plain_text


@pytest.fixture
def service_logging(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    """Puts back the root logger, the quietened loggers and warnings capture after a test
    that calls configure_logging as a service does (in its body: capsys's stderr is the
    test's own there)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    try:
        yield capsys
    finally:
        logging.captureWarnings(False)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _configure() -> None:
    configure_logging("test", "INFO", LogSettings(repeat_window_s=60.0))


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    return [json.loads(line) for line in err.splitlines()]


def test_uvicorn_colour_codes_never_reach_a_line() -> None:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        "",
        0,
        "Uvicorn running on %s",
        ("\x1b[1mhttp://x\x1b[0m",),
        None,
    )
    record.color_message = "Uvicorn running on \x1b[1m%s\x1b[0m"
    record.detail = "bar\r 50%\x1b[2K\x1b[A done"
    line = JsonFormatter("gateway").format(record)
    assert "\\u001b" not in line and "\x1b" not in line and "\\r" not in line
    entry = json.loads(line)
    assert entry["msg"] == "Uvicorn running on http://x"
    assert "color_message" not in entry and entry["detail"] == "bar 50% done"


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        ("\x1b[32mINFO\x1b[0m", "INFO"),
        ("a\x1b[38;5;196mb", "ab"),  # 256 colours
        ("files:  10%|#\r", "files:  10%|#"),
        ("\x1b[A\x1b[2Kline", "line"),  # cursor up, clear line: a redrawn bar
        ("\x1bMx", "x"),  # a two-byte escape
        ("tab\tand ünïcode stay", "tab\tand ünïcode stay"),
    ],
)
def test_plain_text(raw: str, plain: str) -> None:
    assert plain_text(raw) == plain


def test_python_warnings_are_json_records_each_once_per_window(
    service_logging: pytest.CaptureFixture[str],
) -> None:
    _configure()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        for _ in range(3):
            warnings.warn("first thing", UserWarning, stacklevel=1)
        warnings.warn("second thing", DeprecationWarning, stacklevel=1)
    lines = _lines(service_logging)
    assert [line["logger"] for line in lines] == ["py.warnings", "py.warnings"]
    assert "UserWarning: first thing" in str(lines[0]["msg"])
    assert "DeprecationWarning: second thing" in str(lines[1]["msg"])  # not folded into one


def test_library_chatter_is_not_written_and_the_services_own_lines_are(
    service_logging: pytest.CaptureFixture[str],
) -> None:
    _configure()
    logging.getLogger("mcp.server.streamable_http").info("Terminating session: None")
    logging.info('Quantization parameters for tensor:"x" not specified')  # the root logger
    logging.warning("Please consider to run pre-processing before quantization.")
    logging.getLogger("mcp.server.streamable_http").warning("a real problem")
    logging.getLogger("embedder.app").info("embedder serving")
    msgs = [(line["logger"], line["msg"]) for line in _lines(service_logging)]
    assert msgs == [
        ("root", "Please consider to run pre-processing before quantization."),
        ("mcp.server.streamable_http", "a real problem"),
        ("embedder.app", "embedder serving"),
    ]

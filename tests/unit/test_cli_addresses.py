"""Where the direct operator commands find the services: `<SERVICE>_ADDR`, else the ports
the stack in COGRAPH_DATA_DIR wrote under run/ (whatever --port-base chose), else the
default ports."""

from __future__ import annotations

from pathlib import Path

from cograph_cli.identity import DEFAULT_ADDRS, service_address
from svckit.config import Env


def _env(data: Path, **more: str) -> Env:
    return Env({"COGRAPH_DATA_DIR": str(data), **more})


def test_the_running_stacks_ports_then_the_defaults(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert service_address("retrieval", _env(tmp_path)) == DEFAULT_ADDRS["retrieval"]
    (run / "retrieval.port").write_text("43210\n")
    (run / "commons.port").write_text("51000")
    assert service_address("retrieval", _env(tmp_path)) == "127.0.0.1:43210"
    assert service_address("commons", _env(tmp_path)) == "127.0.0.1:51000"
    assert service_address("router", _env(tmp_path)) == DEFAULT_ADDRS["router"]
    # An explicit address wins.
    given = _env(tmp_path, RETRIEVAL_ADDR="10.0.0.5:7000")
    assert service_address("retrieval", given) == "10.0.0.5:7000"


def test_a_port_file_that_is_not_a_port_is_ignored(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for junk in ("", "0", "65536", "-1", "80; rm -rf /", "127.0.0.1:9", "\xff"):
        (run / "retrieval.port").write_text(junk, encoding="latin-1")
        assert service_address("retrieval", _env(tmp_path)) == DEFAULT_ADDRS["retrieval"], junk
    (run / "retrieval.port").unlink()
    (run / "retrieval.port").mkdir()  # not even a file
    assert service_address("retrieval", _env(tmp_path)) == DEFAULT_ADDRS["retrieval"]

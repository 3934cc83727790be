"""A service without a usable internal secret does not start: real processes, one line on
stderr naming the variable, exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from svckit.config import INTERNAL_SECRET_FILE_VAR, INTERNAL_SECRET_VAR

SERVICES = ("embedder", "retrieval", "router", "commons", "gateway")


def _environ_without_secret(**extra: str) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in (INTERNAL_SECRET_FILE_VAR, INTERNAL_SECRET_VAR)
    }
    environ.update(extra)
    return environ


def _start(service: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", service],
        env={
            **environ,
            # Settings are read before anything connects; these only get that far.
            "COGRAPH_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing",
            f"{service.upper()}_LISTEN": "127.0.0.1:0",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_without_a_secret_does_not_start(service: str) -> None:
    done = _start(service, _environ_without_secret())
    assert done.returncode == 2, done.stderr[-2000:]
    assert INTERNAL_SECRET_FILE_VAR in done.stderr and "Traceback" not in done.stderr


def test_a_short_secret_stops_a_service_naming_the_variable(tmp_path: Path) -> None:
    done = _start("router", _environ_without_secret(**{INTERNAL_SECRET_VAR: "too-short"}))
    assert done.returncode == 2
    assert INTERNAL_SECRET_VAR in done.stderr and "at least 32 bytes" in done.stderr
    unreadable = tmp_path / "missing.secret"
    done = _start("router", _environ_without_secret(**{INTERNAL_SECRET_FILE_VAR: str(unreadable)}))
    assert done.returncode == 2
    assert INTERNAL_SECRET_FILE_VAR in done.stderr and str(unreadable) in done.stderr

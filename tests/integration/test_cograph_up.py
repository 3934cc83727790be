"""`cograph up` end to end: real processes, real PostgreSQL, a clean stop, no orphans."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import psutil
import pytest

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from tests.conftest import MODEL_CACHE


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    env = {
        **os.environ,
        "COGRAPH_DATA_DIR": str(tmp_path / "data"),
        "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
    }
    env.pop("COGRAPH_DATABASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "cograph_cli", "up", "--port-base", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    endpoints: dict[str, str] = {}
    assert process.stdout is not None
    deadline = time.monotonic() + 240
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        match = re.match(r"\s+(\w+)\s+(?:grpc|http)://(\S+)", line)
        if match:
            endpoints[match.group(1)] = match.group(2)
        key = re.match(r"admin API key .*: (cg_\S+)$", line)
        if key:
            endpoints["admin_key"] = key.group(1)
        pg = re.match(r"postgres\s+embedded, data in (\S+)", line)
        if pg:
            endpoints["postgres"] = pg.group(1)
        if line.startswith("data in") or time.monotonic() > deadline:
            break
    assert endpoints, "".join(lines)
    try:
        yield process, endpoints
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_up_serves_and_stops_cleanly_on_sigterm(
    up: tuple[subprocess.Popen[str], dict[str, str]],
) -> None:
    process, endpoints = up
    assert "embedder" in endpoints
    with grpc.insecure_channel(endpoints["embedder"]) as channel:
        reply = embedder_pb2_grpc.EmbedderServiceStub(channel).Embed(
            embedder_pb2.EmbedRequest(texts=["is it up?"]), timeout=10
        )
    assert reply.dimension == 384

    children = _descendants(process.pid)
    services = {k: v for k, v in endpoints.items() if k not in ("postgres", "admin_key")}
    assert len(children) >= len(services)
    pgdata = endpoints["postgres"]
    postgres = [
        p for p in psutil.process_iter(["cmdline"]) if pgdata in " ".join(p.info["cmdline"] or [])
    ]
    assert postgres, "embedded postgres should be running"

    # The first start made an admin key, printed it once and kept it in a private file.
    key_file = Path(endpoints["postgres"]).parent / "admin.key"
    assert key_file.read_text().strip() == endpoints["admin_key"]
    assert key_file.stat().st_mode & 0o777 == 0o600
    listed = httpx.get(
        f"http://{endpoints['gateway']}/api/repositories",
        headers={"Authorization": f"Bearer {endpoints['admin_key']}"},
        timeout=10,
    )
    assert listed.status_code == 200

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    _, gone_alive = psutil.wait_procs(children, timeout=10)
    assert not gone_alive, f"orphans left: {gone_alive}"
    _, still_running = psutil.wait_procs(postgres, timeout=10)
    assert not still_running, f"postgres left running: {still_running}"


def test_a_dead_service_is_reported(up: tuple[subprocess.Popen[str], dict[str, str]]) -> None:
    process, _ = up
    embedder = next(p for p in _descendants(process.pid) if "embedder" in " ".join(p.cmdline()))
    embedder.kill()
    assert process.wait(timeout=60) == 1
    assert process.stdout is not None
    rest = process.stdout.read()
    assert "embedder exited with code -9" in rest

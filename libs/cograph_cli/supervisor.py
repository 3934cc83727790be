"""Runs each service as its own process, waits for health, and stops them all together.

Children get PR_SET_PDEATHSIG so that even if the supervisor is killed outright, no service
outlives it; on a normal stop they get SIGTERM (graceful), then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph_cli.services import ServiceSpec

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; Linux only, best effort elsewhere.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class ChildDied(RuntimeError):
    """A service process exited while it should have been running."""


@dataclass
class Child:
    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    ready_file: Path
    port: int = 0

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Supervisor:
    run_dir: Path
    base_env: Mapping[str, str]
    host: str = "127.0.0.1"
    stop_grace_s: float = 10.0
    children: list[Child] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, spec: ServiceSpec, port: int, extra_env: Mapping[str, str]) -> Child:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ready_file = self.run_dir / f"{spec.name}.port"
        ready_file.unlink(missing_ok=True)
        log_path = self.run_dir / f"{spec.name}.log"
        env = {
            **self.base_env,
            **extra_env,
            f"{spec.env_prefix}_LISTEN": f"{self.host}:{port}",
            f"{spec.env_prefix}_READY_FILE": str(ready_file),
            "PYTHONUNBUFFERED": "1",
        }
        log_file = open(log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self._logs.append(log_file)
        process = subprocess.Popen(
            [sys.executable, "-m", spec.name],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            # Only prctl runs between fork and exec; no locks are taken there.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        child = Child(spec, process, log_path, ready_file)
        self.children.append(child)
        return child

    def check_alive(self) -> None:
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                raise ChildDied(
                    f"{child.spec.name} exited with code {code}; last log lines "
                    f"({child.log_path}):\n{child.log_tail()}"
                )

    async def wait_ready(self, timeout_s: float) -> None:
        """Waits until every child wrote its port and reports SERVING (or /readyz 200)."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.children)
        while pending:
            self.check_alive()
            if time.monotonic() > deadline:
                names = ", ".join(c.spec.name for c in pending)
                raise TimeoutError(f"services not ready after {timeout_s:.0f}s: {names}")
            still: list[Child] = []
            for child in pending:
                if not await self._is_ready(child):
                    still.append(child)
            pending = still
            if pending:
                await asyncio.sleep(0.25)

    async def _is_ready(self, child: Child) -> bool:
        if not child.port:
            try:
                child.port = int(child.ready_file.read_text().strip())
            except (OSError, ValueError):
                return False
        target = f"{self.host}:{child.port}"
        if child.spec.kind == "http":
            try:
                async with httpx.AsyncClient(timeout=2.0) as client:
                    reply = await client.get(f"http://{target}/readyz")
                return reply.status_code == 200
            except httpx.HTTPError:
                return False
        async with grpc.aio.insecure_channel(target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                reply = await stub.Check(
                    health_pb2.HealthCheckRequest(service=child.spec.health_name), timeout=2.0
                )
            except grpc.aio.AioRpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def stop_all(self) -> None:
        """SIGTERM everyone at once, then SIGKILL whoever is left after the grace period."""
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        for child in self.children:
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.process.wait(remaining)
            except subprocess.TimeoutExpired:
                log.warning("service did not stop in time", extra={"service": child.spec.name})
                child.process.kill()
                child.process.wait()
        for handle in self._logs:
            handle.close()
        self._logs.clear()

"""Runs each service as its own process, waits for health, restarts what crashes, and stops
them all together.

A service that exits while it should be running is restarted after a backoff that starts
at COGRAPH_UP_RESTART_BACKOFF_S (0.5 s) and doubles up to COGRAPH_UP_RESTART_BACKOFF_MAX_S
(30 s); once a service has stayed up COGRAPH_UP_STABLE_AFTER_S (30 s) the backoff starts
again from the bottom. After COGRAPH_UP_GIVE_UP_CRASHES (5) crashes within
COGRAPH_UP_GIVE_UP_WINDOW_S (60 s) the supervisor gives up on that service, says so with
the end of its log, and keeps everything else running. A restarted service is waited for
exactly as at start (its ready file, then health SERVING or /healthz 200) and binds the port
it had, so its peers find it where they left it.

A service that exits with EXIT_CONFIG (2: a bad setting, a database URL the server refuses)
or EXIT_ENVIRONMENT (3: its port is held by another process) is not restarted: a restart
cannot fix either, so the supervisor gives up on it at once and says why in one line (the
last line the service wrote).

Each service's output goes through a pipe into `run/<service>.log`, rotated by size
(svckit.logs.RotatingLog, COGRAPH_LOG_MAX_BYTES / COGRAPH_LOG_BACKUPS), as is `up.log`.

Where each service serves its Prometheus metrics (`host:port`) is in `run/<service>.metrics`
once it is ready: every service, the gateway included, listens for them on a port of its
own (on the same interface, a free port the first time, the same one after a restart) and
writes that file itself before its ready file.

Children get PR_SET_PDEATHSIG so that even if the supervisor is killed outright, no service
outlives it; on a normal stop they get SIGTERM (graceful), then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph_cli.services import ServiceSpec
from svckit.config import Env
from svckit.logs import LogSettings, RotatingLog
from svckit.ports import EXIT_CONFIG, EXIT_ENVIRONMENT

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.2  # how often a running child's process is polled
_READY_POLL_S = 0.25  # how often a starting child's readiness is checked


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; Linux only, best effort elsewhere.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


@dataclass(frozen=True)
class RestartPolicy:
    """When a crashed process is restarted, and when the supervisor stops trying."""

    backoff_s: float = 0.5
    backoff_max_s: float = 30.0
    stable_after_s: float = 30.0  # up this long: the next crash starts the backoff afresh
    give_up_crashes: int = 5
    give_up_window_s: float = 60.0

    @classmethod
    def from_env(cls, env: Env) -> RestartPolicy:
        return cls(
            backoff_s=env.float("COGRAPH_UP_RESTART_BACKOFF_S", cls.backoff_s, min=0.01, max=60),
            backoff_max_s=env.float(
                "COGRAPH_UP_RESTART_BACKOFF_MAX_S", cls.backoff_max_s, min=0.01, max=3600
            ),
            stable_after_s=env.float(
                "COGRAPH_UP_STABLE_AFTER_S", cls.stable_after_s, min=0.1, max=86_400
            ),
            give_up_crashes=env.int("COGRAPH_UP_GIVE_UP_CRASHES", cls.give_up_crashes, min=1),
            give_up_window_s=env.float(
                "COGRAPH_UP_GIVE_UP_WINDOW_S", cls.give_up_window_s, min=0.1, max=86_400
            ),
        )


class CrashHistory:
    """One process's recent crashes: the delay before its next start, or None to give up."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._crashes: deque[float] = deque()
        self._streak = 0  # crashes since the process last stayed up stable_after_s

    def next_delay(self, now: float, uptime_s: float) -> float | None:
        policy = self.policy
        if uptime_s >= policy.stable_after_s:
            self._streak = 0
        self._crashes.append(now)
        while self._crashes and self._crashes[0] <= now - policy.give_up_window_s:
            self._crashes.popleft()
        if len(self._crashes) >= policy.give_up_crashes:
            return None
        delay = min(policy.backoff_max_s, policy.backoff_s * 2**self._streak)
        self._streak += 1
        return delay

    @property
    def recent(self) -> int:
        """Crashes inside the give-up window, as of the last one recorded."""
        return len(self._crashes)


def describe_exit(code: int) -> str:
    """Popen's returncode in words: negative numbers are the signal that killed it."""
    return f"signal {-code}" if code < 0 else f"code {code}"


class Reporter:
    """Says what the supervisor does: on stdout, and in `up.log` (rotated) with a timestamp."""

    def __init__(
        self,
        log_path: Path | None,
        echo: Callable[[str], None] | None = None,
        settings: LogSettings | None = None,
    ) -> None:
        self._log_path = log_path
        self._settings = settings or LogSettings()
        self._log: RotatingLog | None = None
        self._echo = echo or (lambda line: print(line, flush=True))

    def __call__(self, line: str) -> None:
        self._echo(line)
        if self._log_path is None:
            return
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        try:
            if self._log is None:
                self._log = RotatingLog(self._log_path, self._settings)
            self._log.write(f"{stamp} {line}\n")
        except OSError as err:  # the terminal line was printed; the log is best effort
            log.warning("cannot write %s: %s", self._log_path, err)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _pump(stream: IO[bytes], sink: RotatingLog) -> None:
    """Copies a child's output into its log, line by line, until the child closes it."""
    with stream:
        for raw in iter(stream.readline, b""):
            try:
                sink.write(raw.decode("utf-8", errors="replace"))
            except (OSError, ValueError):  # a full disk, or the log closed at stop
                continue


@dataclass
class Child:
    """One supervised service: its current process (None while waiting to restart)."""

    spec: ServiceSpec
    env: dict[str, str]
    log_path: Path
    ready_file: Path
    history: CrashHistory
    metrics_file: Path  # run/<service>.metrics: `host:port` of its /metrics
    port: int = 0  # the bound port, from the ready file; kept across restarts
    metrics_address: str = ""  # from metrics_file once ready; kept across restarts
    process: subprocess.Popen[bytes] | None = None
    # starting -> ready -> (crash) backoff -> starting ...; failed: given up; stopped.
    state: str = "starting"
    restarts: int = 0
    started_at: float = 0.0
    why: str = ""  # how the last attempt ended, when no process could even be started
    # Set when given up on because of an exit a restart cannot fix (EXIT_CONFIG or
    # EXIT_ENVIRONMENT): the service's own one-line reason.
    fatal: str = ""
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # ready or failed, once
    task: asyncio.Task[None] | None = None
    log: RotatingLog | None = None
    pumps: list[threading.Thread] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

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
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    ready_timeout_s: float = 300.0  # for each start, restarts included
    stop_grace_s: float = 10.0
    report: Callable[[str], None] | None = None
    log_settings: LogSettings = field(default_factory=LogSettings)
    children: list[Child] = field(default_factory=list)
    _stopping: bool = False

    def __post_init__(self) -> None:
        if self.report is None:
            self.report = Reporter(self.run_dir / "up.log")

    def _say(self, line: str) -> None:
        assert self.report is not None
        self.report(line)

    def start(self, spec: ServiceSpec, port: int, extra_env: Mapping[str, str]) -> Child:
        """Starts a service and supervises it until stop(); returns at once."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        metrics_file = self.run_dir / f"{spec.name}.metrics"
        env = {
            **self.base_env,
            **extra_env,
            f"{spec.env_prefix}_LISTEN": f"{self.host}:{port}",
            f"{spec.env_prefix}_READY_FILE": str(self.run_dir / f"{spec.name}.port"),
            "PYTHONUNBUFFERED": "1",
        }
        env[f"{spec.env_prefix}_METRICS_FILE"] = str(metrics_file)
        # The operator's choice stands; else the services' interface, a free port.
        env.setdefault(f"{spec.env_prefix}_METRICS_LISTEN", f"{self.host}:0")
        child = Child(
            spec,
            env,
            self.run_dir / f"{spec.name}.log",
            self.run_dir / f"{spec.name}.port",
            CrashHistory(self.policy),
            metrics_file,
        )
        self.children.append(child)
        self._spawn(child)
        child.task = asyncio.create_task(self._supervise(child), name=f"supervise-{spec.name}")
        return child

    def _spawn(self, child: Child) -> None:
        # Called on the event loop's thread: PR_SET_PDEATHSIG fires when the *thread* that
        # forked exits, so forking from a short-lived executor thread would kill the child.
        child.ready_file.unlink(missing_ok=True)
        child.metrics_file.unlink(missing_ok=True)
        if child.port:
            # Peers were told this address; a restart must come back on it.
            child.env[f"{child.spec.env_prefix}_LISTEN"] = f"{self.host}:{child.port}"
        if child.metrics_address:
            # So does a scraper that read run/<service>.metrics.
            child.env[f"{child.spec.env_prefix}_METRICS_LISTEN"] = child.metrics_address
        if child.log is None:
            child.log = RotatingLog(child.log_path, self.log_settings)
        child.process = subprocess.Popen(
            [sys.executable, "-m", child.spec.name],
            env=child.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            # Only prctl runs between fork and exec; no locks are taken there.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )
        assert child.process.stdout is not None
        # A thread, not the event loop: a blocking read of a pipe is what a thread is for,
        # and a child writing faster than the loop serves it must not stall supervision.
        pump = threading.Thread(
            target=_pump,
            args=(child.process.stdout, child.log),
            name=f"log-{child.spec.name}",
            daemon=True,
        )
        pump.start()
        child.pumps = [t for t in child.pumps if t.is_alive()] + [pump]
        child.state = "starting"
        child.started_at = time.monotonic()

    async def _supervise(self, child: Child) -> None:
        try:
            await self._keep_running(child)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a bug here must not leave a service silently unwatched
            log.exception("supervision failed", extra={"service": child.spec.name})
            child.state = "failed"
            child.settled.set()
            self._say(f"{child.spec.name}: supervision failed ({err}); it is no longer restarted")

    async def _keep_running(self, child: Child) -> None:
        while True:
            why = await self._run_once(child) if child.process is not None else child.why
            if self._stopping:
                return
            code = child.process.returncode if child.process is not None else None
            if code in (EXIT_CONFIG, EXIT_ENVIRONMENT):
                await self._give_up_fatal(child, why)
                return
            now = time.monotonic()
            delay = child.history.next_delay(now, now - child.started_at)
            child.process = None
            if delay is None:
                child.state = "failed"
                child.settled.set()
                window = self.policy.give_up_window_s
                self._say(
                    f"{child.spec.name} {why}; giving up after {child.history.recent} crashes "
                    f"within {window:g} s: it stays down, everything else keeps running "
                    f"(restart cograph up to try again). Last log lines ({child.log_path}):\n"
                    f"{child.log_tail()}"
                )
                return
            child.restarts += 1
            child.state = "backoff"
            self._say(
                f"{child.spec.name} {why}; restarting in {delay:.1f} s, restart {child.restarts}"
            )
            await asyncio.sleep(delay)
            try:
                self._spawn(child)
            except OSError as err:  # no process at all (fds, memory): counts as a crash
                child.process = None
                child.started_at = time.monotonic()
                child.why = f"could not be started ({err})"

    async def _give_up_fatal(self, child: Child, why: str) -> None:
        """Gives up at once on a child that exited saying a restart cannot help."""
        for pump in child.pumps:  # its last words are in the pipe until the pump is done
            await asyncio.to_thread(pump.join, 5.0)
        child.process = None
        lines = [line for line in child.log_tail(50).splitlines() if line.strip()]
        # The service's own line (`<name>: ...`), not gRPC's or Python's noise around it.
        own = [line for line in lines if line.startswith(f"{child.spec.name}: ")]
        child.fatal = (own or lines or [why])[-1].strip()
        child.state = "failed"
        child.settled.set()
        self._say(
            f"{child.spec.name} {why}: {child.fatal}; not restarting (a restart cannot fix "
            "this), everything else keeps running"
        )

    async def _run_once(self, child: Child) -> str:
        """Waits for the current process to become ready, then to end; says how it ended."""
        process = child.process
        assert process is not None
        deadline = child.started_at + self.ready_timeout_s
        while True:
            code = process.poll()
            if code is not None:
                return f"exited ({describe_exit(code)})"
            if child.state == "starting":
                if await self._is_ready(child):
                    self._note_metrics(child)
                    child.state = "ready"
                    child.settled.set()
                    if child.restarts:
                        self._say(
                            f"{child.spec.name} is serving again (pid {process.pid}, "
                            f"restart {child.restarts})"
                        )
                    continue
                if time.monotonic() > deadline:
                    # Alive but never ready counts as a crash: kill it and try again.
                    process.kill()
                    await asyncio.to_thread(process.wait)
                    return f"was not ready within {self.ready_timeout_s:.0f} s"
                await asyncio.sleep(_READY_POLL_S)
            else:
                await asyncio.sleep(_POLL_S)

    async def wait_ready(self, timeout_s: float, children: Iterable[Child] | None = None) -> None:
        """Waits until each child (all by default) is ready or has been given up on."""
        pending = list(self.children if children is None else children)
        if not pending:
            return
        waits = [asyncio.create_task(child.settled.wait()) for child in pending]
        try:
            _, not_done = await asyncio.wait(waits, timeout=timeout_s)
        finally:
            for wait in waits:
                wait.cancel()
        if not_done:
            names = ", ".join(c.spec.name for c in pending if not c.settled.is_set())
            raise TimeoutError(f"services not ready after {timeout_s:.0f}s: {names}")

    def failed(self) -> list[Child]:
        return [child for child in self.children if child.state == "failed"]

    def _note_metrics(self, child: Child) -> None:
        """Records where a ready child serves its metrics: it wrote run/<service>.metrics
        before its ready file."""
        try:
            child.metrics_address = child.metrics_file.read_text().strip()
        except OSError:  # metrics turned off (<SERVICE>_METRICS_LISTEN=off)
            child.metrics_address = ""

    async def _is_ready(self, child: Child) -> bool:
        # The ready file is removed before each start, so its presence means this very
        # process has bound its port.
        try:
            child.port = int(child.ready_file.read_text().strip())
        except (OSError, ValueError):
            return False
        target = f"{self.host}:{child.port}"
        if child.spec.kind == "http":
            # /healthz, not /readyz: the gateway's readiness includes its backends, which
            # are supervised on their own; a gateway restarted while one of them is down
            # (or given up on) is still up, and must not be killed for not being "ready".
            # The services it fronts have been waited for before it was started.
            try:
                async with httpx.AsyncClient(timeout=2.0) as client:
                    reply = await client.get(f"http://{target}/healthz")
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

    async def stop(self) -> None:
        """Stops supervising (a pending restart is cancelled), then stops every process."""
        self._stopping = True
        tasks = [child.task for child in self.children if child.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.stop_all()

    def stop_all(self) -> None:
        """SIGTERM everyone at once, then SIGKILL whoever is left after the grace period."""
        self._stopping = True
        running = [c for c in self.children if c.process is not None]
        for child in running:
            assert child.process is not None
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        for child in running:
            assert child.process is not None
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.process.wait(remaining)
            except subprocess.TimeoutExpired:
                log.warning("service did not stop in time", extra={"service": child.spec.name})
                child.process.kill()
                child.process.wait()
        for child in self.children:
            if child.state != "failed":
                child.state = "stopped"
            for pump in child.pumps:  # the processes are gone: their pipes end
                pump.join(5.0)
            child.pumps = []
            if child.log is not None:
                child.log.close()
                child.log = None

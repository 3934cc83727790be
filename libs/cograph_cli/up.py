"""`cograph up`: PostgreSQL (embedded unless COGRAPH_DATABASE_URL is set), migrations, every
service in its own process, endpoints printed, and a clean stop on Ctrl-C or SIGTERM.

What crashes is restarted (see supervisor.py for the policy), the embedded PostgreSQL too.
When the supervisor gives up on a service, the rest keeps running and the final exit status
is 1; when it gives up on PostgreSQL, or on every service, there is nothing left worth
running and `cograph up` stops everything and exits 1.

What a restart cannot fix stops the start in one line, before "cograph is up" and with
nothing left running: a port in use (named, with the process holding it), a data directory
that is not writable, a COGRAPH_DATABASE_URL the server refuses or that cannot be reached,
a service that exits saying its configuration or environment is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path

from cograph_cli.internal_secret import ensure_secret_file
from cograph_cli.migrate_cmd import migrate_all
from cograph_cli.services import SERVICES, ServiceSpec
from cograph_cli.supervisor import CrashHistory, Reporter, RestartPolicy, Supervisor
from svckit.config import (
    INTERNAL_SECRET_FILE_VAR,
    INTERNAL_SECRET_VAR,
    Env,
    data_dir,
    ensure_writable_dir,
    internal_secret,
)
from svckit.db import database_problem, ensure_extensions
from svckit.disk import DiskSettings, DiskState, DiskWatch
from svckit.embedded import EmbeddedPostgres
from svckit.logs import LogSettings
from svckit.ports import PortInUse, check_port_free

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "up", help="run every service in the foreground until Ctrl-C / SIGTERM"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface services listen on")
    parser.add_argument(
        "--port-base",
        type=int,
        default=None,
        help="listen on consecutive ports from here (0: let the OS pick free ports)",
    )
    parser.add_argument("--ready-timeout", type=float, default=300.0, help="seconds")
    parser.set_defaults(handler=run_up)


def _port_for(spec: ServiceSpec, index: int, base: int | None) -> int:
    if base is None:
        return spec.port
    return 0 if base == 0 else base + index


async def _bootstrap_admin_key(dsn: str, root: Path, specs: list[ServiceSpec]) -> str | None:
    """The first start creates an admin key so the person running Cograph can use it."""
    if not any(spec.name == "gateway" for spec in specs):
        return None
    from cograph_api.admin_keys import ensure_admin_key
    from cograph_cli.services import gateway_migrations

    return await ensure_admin_key(dsn, root, gateway_migrations())


def _internal_secret_env(environ: Mapping[str, str], root: Path) -> dict[str, str]:
    """What tells every child the secret internal calls are signed with: the one configured
    (children inherit the variable), else the data directory's, created on the first run."""
    if environ.get(INTERNAL_SECRET_FILE_VAR) or environ.get(INTERNAL_SECRET_VAR):
        secret_env: dict[str, str] = {}
    else:
        secret_env = {INTERNAL_SECRET_FILE_VAR: str(ensure_secret_file(root))}
    # A missing, short or unreadable secret stops us here, before anything starts.
    internal_secret(Env({**environ, **secret_env}))
    return secret_env


def _install_stop_signals(stop: asyncio.Event) -> Callable[[], None]:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def remove() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)

    return remove


def _check_ports(host: str, ports: Mapping[str, int]) -> str | None:
    """The error line for the first fixed port already in use, else None. Checked before
    anything starts; a port taken after this check fails that service's start instead
    (it exits EXIT_ENVIRONMENT and `cograph up` stops)."""
    for name, port in ports.items():
        try:
            check_port_free(host, port)
        except PortInUse as err:
            return f"error: {name} cannot listen: {err}"
    return None


async def _up(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    env = Env(environ)
    root = ensure_writable_dir(data_dir(env), "COGRAPH_DATA_DIR")
    log_settings = LogSettings.from_env(env)
    specs = [spec for spec in SERVICES if spec.available()]
    ports = {spec.name: _port_for(spec, i, args.port_base) for i, spec in enumerate(specs)}
    busy = _check_ports(args.host, ports)
    if busy is not None:
        print(busy, file=sys.stderr, flush=True)
        return 1
    secret_env = _internal_secret_env(environ, root)
    stop = asyncio.Event()
    remove_signals = _install_stop_signals(stop)
    embedded: EmbeddedPostgres | None = None
    dsn = env.optional_str("COGRAPH_DATABASE_URL")
    supervisor: Supervisor | None = None
    pg_watch: PostgresWatch | None = None
    policy = RestartPolicy.from_env(env)
    report = Reporter(root / "run" / "up.log", settings=log_settings)
    try:
        if dsn is None:
            embedded = EmbeddedPostgres(root / "pg")
            dsn = await asyncio.get_running_loop().run_in_executor(None, embedded.start)
            print(f"postgres   embedded, data in {root / 'pg'}", flush=True)
            # Watched from here on: a server lost during migrations or start-up comes back too.
            pg_watch = PostgresWatch(
                embedded, dsn, policy, report, disk=DiskWatch(DiskSettings.from_env(env))
            )
            pg_watch.start()
        else:
            print("postgres   COGRAPH_DATABASE_URL", flush=True)
        try:
            await ensure_extensions(dsn)
        except Exception as err:
            problem = database_problem(err, dsn)
            if problem is None:
                raise
            print(f"error: {problem}", file=sys.stderr, flush=True)
            return 2 if problem.permanent else 1
        await migrate_all(dsn, specs)
        admin_key = await _bootstrap_admin_key(dsn, root, specs)

        supervisor = Supervisor(
            root / "run",
            environ,
            host=args.host,
            policy=policy,
            ready_timeout_s=args.ready_timeout,
            report=report,
            log_settings=log_settings,
        )
        # Fixed ports are known up front, so peers can be wired before anyone starts; with
        # OS-picked ports (tests) services start in order and each learns its peers' ports.
        peer_env: dict[str, str] = {
            "COGRAPH_DATABASE_URL": dsn,
            "COGRAPH_DATA_DIR": str(root),
            **secret_env,
        }
        for spec in specs:
            if ports[spec.name]:
                peer_env[f"{spec.env_prefix}_ADDR"] = f"{args.host}:{ports[spec.name]}"

        async def start_all() -> None:
            for spec in specs:
                child = supervisor.start(spec, ports[spec.name], peer_env)
                if not ports[spec.name]:
                    await supervisor.wait_ready(args.ready_timeout, [child])
                    if child.fatal:  # it cannot start here: nor can the stack
                        return
                    if child.port:  # else given up before it ever bound a port
                        peer_env[f"{spec.env_prefix}_ADDR"] = f"{args.host}:{child.port}"
            await supervisor.wait_ready(args.ready_timeout)

        starting = asyncio.create_task(start_all())
        stopped = asyncio.create_task(stop.wait())
        waits = {starting, stopped}
        if pg_watch is not None:
            waits.add(asyncio.create_task(pg_watch.lost.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits - {starting}:
            wait.cancel()
        if not starting.done():
            starting.cancel()
            with suppress(asyncio.CancelledError, TimeoutError):
                await starting
            return 130 if stop.is_set() else 1
        starting.result()
        fatal = [child for child in supervisor.children if child.fatal]
        if fatal:
            # A service that cannot start here (its port is taken, its settings are wrong)
            # makes the whole stack unusable as configured: say so and stop everything.
            for child in fatal:
                print(f"error: {child.fatal}", file=sys.stderr, flush=True)
            return 1
        _print_endpoints(supervisor, args.host, root, admin_key)
        while not stop.is_set():
            if pg_watch is not None and pg_watch.lost.is_set():
                return 1
            if supervisor.children and len(supervisor.failed()) == len(supervisor.children):
                report("every service has been given up on; stopping")
                return 1
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)
        print("stopping…", flush=True)
        # A service given up on during the run makes the run a failure for whoever
        # started it (a service manager, a script), even though it ran until told to stop.
        return 1 if supervisor.failed() else 0
    except TimeoutError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        # Signal handlers stay installed while stopping: a second Ctrl-C must not interrupt
        # the shutdown half-way and leave a child or the database running.
        if pg_watch is not None:
            await pg_watch.stop()
        if supervisor is not None:
            await supervisor.stop()
        if embedded is not None:
            embedded.stop()
        report.close()
        remove_signals()
        print("stopped", flush=True)


# Even with the watch off (COGRAPH_DISK_MIN_FREE_MB=0), PostgreSQL is not restarted with
# less than this free: it would only fail its recovery again.
PG_MIN_FREE_BYTES = 64 * 1024 * 1024


class PostgresWatch:
    """Restarts the embedded PostgreSQL when its postmaster dies, with the services' policy.

    The services are left running: their pools drop the broken connections and open new
    ones (to the same socket) once the server is back.

    A server that died on a full disk (its WAL could not grow) cannot be restarted into
    health: recovery needs room too. So when the data directory's filesystem has less than
    COGRAPH_DISK_MIN_FREE_MB (at least `PG_MIN_FREE_BYTES`) free, the watch says so and
    waits for room instead of restarting, and none of that counts towards giving up; once
    there is room it restarts the server with a fresh crash history.
    """

    def __init__(
        self,
        embedded: EmbeddedPostgres,
        dsn: str,
        policy: RestartPolicy,
        report: Callable[[str], None],
        *,
        disk: DiskWatch | None = None,
    ) -> None:
        self._embedded = embedded
        self._disk = disk
        self._dsn = dsn
        self._policy = policy
        self._report = report
        self._task: asyncio.Task[None] | None = None
        self._restarting: asyncio.Future[str] | None = None
        self.lost = asyncio.Event()  # given up on: nothing can run without the database

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="watch-postgres")

    async def _watch(self) -> None:
        history = CrashHistory(self._policy)
        up_since = time.monotonic()
        restarts = 0
        pid = self._embedded.pid()
        why = f"exited (pid {pid})"
        while True:
            await asyncio.sleep(0.5)
            if self._embedded.is_running():
                continue
            while True:
                if await self._waited_for_room(why):
                    history = CrashHistory(self._policy)  # a full disk was no crash
                    up_since = time.monotonic()
                now = time.monotonic()
                delay = history.next_delay(now, now - up_since)
                if delay is None:
                    self._report(
                        f"postgres {why}; giving up after {history.recent} crashes within "
                        f"{self._policy.give_up_window_s:g} s; stopping everything (server "
                        f"log: {self._embedded.pgdata / 'log'})"
                    )
                    self.lost.set()
                    return
                restarts += 1
                self._report(f"postgres {why}; restarting in {delay:.1f} s, restart {restarts}")
                await asyncio.sleep(delay)
                up_since = time.monotonic()
                # pg_ctl blocks (it waits for the server, at most 10 s): off the loop.
                self._restarting = asyncio.get_running_loop().run_in_executor(
                    None, self._embedded.restart
                )
                try:
                    url = await self._restarting
                except Exception as err:  # it failed to start: that is another crash
                    first = str(err).splitlines()[0] if str(err) else type(err).__name__
                    why = f"did not start ({first[:200]})"
                    continue
                finally:
                    self._restarting = None
                pid = self._embedded.pid()
                why = f"exited (pid {pid})"
                if url != self._dsn:  # the services only know the first address
                    self._report(
                        f"postgres came back at {url}, not {self._dsn}; the services cannot "
                        "follow it: restart cograph up"
                    )
                self._report(
                    f"postgres is serving again (pid {pid}, restart {restarts}); the services "
                    "reconnect by themselves"
                )
                break

    def _low(self) -> DiskState | None:
        if self._disk is None:
            return None
        state = self._disk.state()
        floor = max(self._disk.settings.min_free_bytes, PG_MIN_FREE_BYTES)
        return state if state.free_bytes < floor else None

    async def _waited_for_room(self, why: str) -> bool:
        """Waits while the disk is nearly full; whether it had to."""
        low = self._low()
        if low is None or self._disk is None:
            return False
        self._report(
            f"postgres {why}; {low.describe(self._disk.settings)}: a restart cannot fix "
            "that, so it waits for room (not counted as a crash)"
        )
        while low is not None:
            await asyncio.sleep(max(self._disk.settings.check_s, 1.0))
            low = self._low()
        self._report("the disk has room again; restarting postgres")
        return True

    async def stop(self) -> None:
        if self._task is not None:
            restarting = self._restarting
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            if restarting is not None:
                # Let a pg_ctl start finish before the server is stopped, or the stop could
                # race it and leave a server behind.
                await asyncio.wait({restarting}, timeout=30)


def _print_endpoints(supervisor: Supervisor, host: str, root: Path, admin_key: str | None) -> None:
    print("cograph is up", flush=True)
    for child in supervisor.children:
        scheme = "http" if child.spec.kind == "http" else "grpc"
        if child.state == "failed":
            print(f"  {child.spec.name:<10} FAILED (gave up)   log {child.log_path}", flush=True)
            continue
        metrics = f"   metrics {child.metrics_address}" if child.metrics_address else ""
        print(
            f"  {child.spec.name:<10} {scheme}://{host}:{child.port}   log {child.log_path}"
            f"{metrics}",
            flush=True,
        )
    if admin_key:
        print(f"admin API key (shown once; kept in {root / 'admin.key'}): {admin_key}")
    print(f"data in {root}; Ctrl-C stops everything", flush=True)


def run_up(args: argparse.Namespace) -> int:
    return asyncio.run(_up(args, dict(os.environ)))

"""`cograph up`: PostgreSQL (embedded unless COGRAPH_DATABASE_URL is set), migrations, every
service in its own process, endpoints printed, and a clean stop on Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path

from cograph_cli.internal_secret import ensure_secret_file
from cograph_cli.migrate_cmd import migrate_all
from cograph_cli.services import SERVICES, ServiceSpec
from cograph_cli.supervisor import ChildDied, Supervisor
from svckit.config import (
    INTERNAL_SECRET_FILE_VAR,
    INTERNAL_SECRET_VAR,
    Env,
    data_dir,
    internal_secret,
)
from svckit.db import ensure_extensions
from svckit.embedded import EmbeddedPostgres

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
    from gateway.keys_store import ensure_admin_key

    return await ensure_admin_key(dsn, root)


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


async def _up(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    env = Env(environ)
    root = data_dir(env)
    root.mkdir(parents=True, exist_ok=True)
    secret_env = _internal_secret_env(environ, root)
    stop = asyncio.Event()
    remove_signals = _install_stop_signals(stop)
    embedded: EmbeddedPostgres | None = None
    dsn = env.optional_str("COGRAPH_DATABASE_URL")
    supervisor: Supervisor | None = None
    try:
        if dsn is None:
            embedded = EmbeddedPostgres(root / "pg")
            dsn = await asyncio.get_running_loop().run_in_executor(None, embedded.start)
            print(f"postgres   embedded, data in {root / 'pg'}", flush=True)
        else:
            print("postgres   COGRAPH_DATABASE_URL", flush=True)
        await ensure_extensions(dsn)
        specs = [spec for spec in SERVICES if spec.available()]
        await migrate_all(dsn, specs)
        admin_key = await _bootstrap_admin_key(dsn, root, specs)

        supervisor = Supervisor(root / "run", environ, host=args.host)
        ports = {spec.name: _port_for(spec, i, args.port_base) for i, spec in enumerate(specs)}
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
        for spec in specs:
            supervisor.start(spec, ports[spec.name], peer_env)
            if not ports[spec.name]:
                await supervisor.wait_ready(args.ready_timeout)
                child = supervisor.children[-1]
                peer_env[f"{spec.env_prefix}_ADDR"] = f"{args.host}:{child.port}"
        ready = asyncio.create_task(supervisor.wait_ready(args.ready_timeout))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            ready.cancel()
            return 130
        stopped.cancel()
        ready.result()
        _print_endpoints(supervisor, args.host, root, admin_key)
        while not stop.is_set():
            supervisor.check_alive()
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.5)
        print("stopping…", flush=True)
        return 0
    except ChildDied as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    except TimeoutError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        # Signal handlers stay installed while stopping: a second Ctrl-C must not interrupt
        # the shutdown half-way and leave a child or the database running.
        if supervisor is not None:
            supervisor.stop_all()
        if embedded is not None:
            embedded.stop()
        remove_signals()
        print("stopped", flush=True)


def _print_endpoints(supervisor: Supervisor, host: str, root: Path, admin_key: str | None) -> None:
    print("cograph is up", flush=True)
    for child in supervisor.children:
        scheme = "http" if child.spec.kind == "http" else "grpc"
        print(
            f"  {child.spec.name:<10} {scheme}://{host}:{child.port}   log {child.log_path}",
            flush=True,
        )
    if admin_key:
        print(f"admin API key (shown once; kept in {root / 'admin.key'}): {admin_key}")
    print(f"data in {root}; Ctrl-C stops everything", flush=True)


def run_up(args: argparse.Namespace) -> int:
    return asyncio.run(_up(args, dict(os.environ)))

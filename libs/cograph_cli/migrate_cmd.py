"""`cograph migrate`: apply every service's migrations to COGRAPH_DATABASE_URL.

`cograph up` does this itself; on Kubernetes it runs as each database service's
initContainer (idempotent, serialised by an advisory lock), so read-only services (the
router) never need write rights.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Sequence

from cograph_cli.cli_errors import EXIT_USAGE, print_error
from cograph_cli.services import SERVICES, ServiceSpec
from svckit.config import ConfigError, Env
from svckit.db import ensure_extensions
from svckit.migrations import migrate

# Retrieval's tables come before the router's, which index them.
_ORDER = ("retrieval", "commons", "gateway", "router", "embedder")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "migrate", help="create the extensions and apply every service's migrations"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the versions applied per service as JSON"
    )
    parser.set_defaults(handler=run_migrate)


async def migrate_all(dsn: str, specs: Sequence[ServiceSpec]) -> dict[str, list[int]]:
    """Applies each service's pending migrations in dependency order."""
    applied: dict[str, list[int]] = {}
    for spec in sorted(specs, key=lambda s: _ORDER.index(s.name) if s.name in _ORDER else 99):
        folder = spec.migrations_dir()
        if folder is not None:
            applied[spec.name] = await migrate(dsn, spec.name, folder)
    return applied


async def _run(dsn: str, as_json: bool) -> None:
    await ensure_extensions(dsn)
    applied = await migrate_all(dsn, [spec for spec in SERVICES if spec.available()])
    if as_json:
        print(json.dumps({"applied": applied}))
        return
    for name, versions in applied.items():
        done = ", ".join(f"{v:04d}" for v in versions) or "up to date"
        print(f"{name:<10} {done}")


def run_migrate(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))  # callers that build the Namespace omit it
    try:
        dsn = Env(os.environ).str("COGRAPH_DATABASE_URL")
    except ConfigError as err:
        print_error(as_json, "configuration", str(err))
        return EXIT_USAGE
    asyncio.run(_run(dsn, as_json))
    return 0

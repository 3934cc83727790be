"""The life of a service process: settings, logs, tracing, start, ready file, signal, stop.

Every service's `__main__` is this sequence with its own settings and composition root.
What the operator must fix ends the process with one line on stderr and no traceback: a bad
setting or a database that refuses the configured URL (exit 2, EXIT_CONFIG), a port held
by another process (exit 3, EXIT_ENVIRONMENT). The supervisor does not restart on either;
an unreachable database is one line too, but exit 1: it may come back, so it is retried.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from opentelemetry.sdk.trace import TracerProvider

from svckit.config import ConfigError, Env
from svckit.db import database_problem
from svckit.logs import LogSettings, configure_logging
from svckit.ports import EXIT_CONFIG, EXIT_ENVIRONMENT, PortInUse
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


class StartupFailure(Exception):
    """The service cannot start for a reason stated in one line; `code` is the exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class ServiceSettings(Protocol):
    @property
    def log_level(self) -> str: ...

    @property
    def ready_file(self) -> Path | None: ...


class RunningService(Protocol):
    @property
    def port(self) -> int: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=ServiceSettings)


async def serve(
    name: str,
    load: Callable[[Env], S],
    start: Callable[[S, TracerProvider], Awaitable[RunningService]],
) -> None:
    """Runs one service until SIGTERM or SIGINT, then stops it and flushes its spans."""
    env = Env()
    settings = load(env)
    configure_logging(name, settings.log_level, LogSettings.from_env(env))
    provider = setup_tracing(name, env)
    try:
        app = await start(settings, provider)
    except (ConfigError, PortInUse):
        provider.shutdown()
        raise
    except Exception as err:
        url = getattr(settings, "database_url", None)
        problem = database_problem(err, url) if isinstance(url, str) else None
        provider.shutdown()
        if problem is None:
            raise
        raise StartupFailure(str(problem), EXIT_CONFIG if problem.permanent else 1) from None
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


def run(
    name: str,
    load: Callable[[Env], S],
    start: Callable[[S, TracerProvider], Awaitable[RunningService]],
) -> None:
    try:
        asyncio.run(serve(name, load, start))
    except ConfigError as err:
        # A bad setting is the operator's to fix: one line naming the variable, exit 2.
        print(f"{name}: configuration error: {err}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except PortInUse as err:
        print(f"{name}: cannot listen: {err}", file=sys.stderr)
        sys.exit(EXIT_ENVIRONMENT)
    except StartupFailure as err:
        print(f"{name}: {err}", file=sys.stderr)
        sys.exit(err.code)

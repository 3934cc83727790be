"""The life of a service process: settings, logs, tracing, start, ready file, signal, stop.

Every service's `__main__` is this sequence with its own settings and composition root.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from opentelemetry.sdk.trace import TracerProvider

from svckit.config import ConfigError, Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


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
    configure_logging(name, settings.log_level)
    provider = setup_tracing(name, env)
    app = await start(settings, provider)
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
        sys.exit(2)

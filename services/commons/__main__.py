"""`python -m commons`: run the commons service until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio

from commons.app import start_commons
from commons.settings import CommonsSettings
from svckit.config import Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


async def main() -> None:
    env = Env()
    settings = CommonsSettings.from_env(env)
    configure_logging("commons", settings.log_level)
    provider = setup_tracing("commons", env)
    app = await start_commons(settings, tracer_provider=provider)
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

"""`python -m router`: run the router service until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio

from router.app import start_router
from router.settings import RouterSettings
from svckit.config import Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


async def main() -> None:
    env = Env()
    settings = RouterSettings.from_env(env)
    configure_logging("router", settings.log_level)
    provider = setup_tracing("router", env)
    app = await start_router(settings, provider)
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

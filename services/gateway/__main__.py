"""`python -m gateway`: serve the REST API, MCP and the console until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio

from gateway.app import start_gateway
from gateway.settings import GatewaySettings
from svckit.config import Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


async def main() -> None:
    env = Env()
    settings = GatewaySettings.from_env(env)
    configure_logging("gateway", settings.log_level)
    provider = setup_tracing("gateway", env)
    app = await start_gateway(settings, provider)
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

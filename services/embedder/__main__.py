"""`python -m embedder`: run the embedder service until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio

from embedder.app import start_embedder
from embedder.settings import EmbedderSettings
from svckit.config import Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


async def main() -> None:
    env = Env()
    settings = EmbedderSettings.from_env(env)
    configure_logging("embedder", settings.log_level)
    provider = setup_tracing("embedder", env)
    app = await start_embedder(settings, provider)
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

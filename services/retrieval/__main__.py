"""`python -m retrieval`: run the retrieval service until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio

from retrieval.app import start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from svckit.logs import configure_logging
from svckit.server import wait_for_signal, write_ready_file
from svckit.telemetry import setup_tracing


async def main() -> None:
    env = Env()
    settings = RetrievalSettings.from_env(env)
    configure_logging("retrieval", settings.log_level)
    provider = setup_tracing("retrieval", env)
    app = await start_retrieval(settings, provider)
    write_ready_file(settings.ready_file, app.port)
    await wait_for_signal()
    await app.stop()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())

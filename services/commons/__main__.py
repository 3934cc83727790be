"""`python -m commons`: run the commons service until SIGTERM/SIGINT."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from commons.app import CommonsApp, start_commons
from commons.settings import CommonsSettings
from svckit.runner import run


async def _start(settings: CommonsSettings, provider: TracerProvider) -> CommonsApp:
    return await start_commons(settings, tracer_provider=provider)


if __name__ == "__main__":
    run("commons", CommonsSettings.from_env, _start)

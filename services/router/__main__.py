"""`python -m router`: run the router service until SIGTERM/SIGINT."""

from __future__ import annotations

from router.app import start_router
from router.settings import RouterSettings
from svckit.runner import run

if __name__ == "__main__":
    run("router", RouterSettings.from_env, start_router)

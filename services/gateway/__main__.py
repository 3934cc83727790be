"""`python -m gateway`: serve the REST API, MCP and the console until SIGTERM/SIGINT."""

from __future__ import annotations

from gateway.app import start_gateway
from gateway.settings import GatewaySettings
from svckit.runner import run

if __name__ == "__main__":
    run("gateway", GatewaySettings.from_env, start_gateway)

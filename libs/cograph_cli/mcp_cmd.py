"""`cograph mcp`: Cograph's MCP tools over stdio, for agents that launch their servers.

The tools call the gateway's REST API (COGRAPH_GATEWAY_URL) with COGRAPH_API_KEY, else the
key in $COGRAPH_DATA_DIR/admin.key. stdout carries the protocol; logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from cograph_api.mcp_tools import serve_stdio
from cograph_api.rest_client import ClientConfig, RestClient


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mcp", help="serve Cograph's MCP tools over stdio (talks to the gateway)"
    )
    parser.set_defaults(handler=run_mcp)


async def _serve(config: ClientConfig) -> None:
    client = RestClient(config)
    try:
        await serve_stdio(client)
    finally:
        await client.close()


def run_mcp(args: argparse.Namespace) -> int:
    config = ClientConfig.from_env(os.environ)
    if config.key is None:
        print(f"cograph mcp: no API key found in {config.key_source}", file=sys.stderr)
        return 2
    asyncio.run(_serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(run_mcp(argparse.Namespace()))

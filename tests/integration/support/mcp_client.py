"""The MCP SDK's own client over streamable HTTP at the gateway's /mcp, with a Bearer key."""

from __future__ import annotations

from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.support.stacks import Stack


def http_client(stack: Stack, key: str) -> Client:
    transport = streamable_http_client(
        f"{stack.url}/mcp",
        http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60),
    )
    return Client(transport)


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    result = await client.call_tool(name, arguments)
    return result.is_error, result.structured_content

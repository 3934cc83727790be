"""Running one gateway REST call from a CLI command, and reporting its error plainly.

The key is COGRAPH_API_KEY, else $COGRAPH_DATA_DIR/admin.key (written by the first
`cograph up`); the gateway is COGRAPH_GATEWAY_URL (default http://127.0.0.1:8080).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from cograph_api.rest_client import ClientConfig, RestClient
from cograph_api.rest_errors import ApiError
from cograph_cli.cli_errors import print_error

Handler = Callable[[argparse.Namespace], int]


def call_gateway(call: Callable[[RestClient], Awaitable[Any]]) -> Any:
    config = ClientConfig.from_env(os.environ)
    if config.key is None:
        raise ApiError(401, "unauthenticated", f"no API key found in {config.key_source}")

    async def go() -> Any:
        client = RestClient(config)
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(go())


def invalid_argument(err: ValidationError) -> ApiError:
    """A request model's validation error as the 400 the gateway would have answered."""
    return ApiError(400, "invalid_argument", str(err.errors()[0]["msg"]))


def guarded(handler: Handler) -> Handler:
    """Prints an ApiError (as JSON with --json) and exits 1 instead of a traceback."""

    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ApiError as err:
            print_error(bool(getattr(args, "json", False)), err.error, err.detail)
            return 1

    return wrapped

"""A real svckit GrpcHost (its interceptors, signed-call verification with the test secret)
serving raw-bytes methods of one made-up service, for tests of the kit itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import grpc

from svckit.internal_auth import TokenVerifier
from svckit.server import GrpcHost
from tests.internal_auth import TEST_SECRET


@asynccontextmanager
async def generic_host(
    service: str, methods: Mapping[str, grpc.RpcMethodHandler]
) -> AsyncIterator[str]:
    """The address of a started host serving `methods` under `service`; stopped after."""
    handlers = grpc.method_handlers_generic_handler(service, dict(methods))
    host = GrpcHost(
        [service],
        [lambda server: server.add_generic_rpc_handlers((handlers,))],
        verifier=TokenVerifier(TEST_SECRET.encode()),
    )
    await host.start()
    try:
        yield f"127.0.0.1:{host.port}"
    finally:
        await host.stop()

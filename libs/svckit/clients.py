"""gRPC client helpers: channels that carry request context, tracing and a default deadline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from opentelemetry.sdk.trace import TracerProvider

from svckit import requestctx
from svckit.telemetry import client_interceptors


class ContextClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds request id and principal metadata, and a deadline when the caller set none.

    Without a default deadline a hung peer would hang every caller; DESIGN.md requires one.
    """

    def __init__(self, default_timeout_s: float) -> None:
        self._default_timeout_s = default_timeout_s

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        metadata = list(client_call_details.metadata or ())
        present = {key for key, _ in metadata}
        metadata.extend(kv for kv in requestctx.outgoing_metadata() if kv[0] not in present)
        timeout = client_call_details.timeout
        if timeout is None:
            timeout = self._default_timeout_s
        details = grpc.aio.ClientCallDetails(
            method=client_call_details.method,
            timeout=timeout,
            metadata=grpc.aio.Metadata(*metadata),
            credentials=client_call_details.credentials,
            wait_for_ready=client_call_details.wait_for_ready,
        )
        return await continuation(details, request)


def dial(
    target: str,
    *,
    default_timeout_s: float = 10.0,
    tracer_provider: TracerProvider | None = None,
) -> grpc.aio.Channel:
    """An insecure channel to a peer inside the cluster (mTLS belongs to the mesh)."""
    interceptors: list[Any] = [
        ContextClientInterceptor(default_timeout_s),
        *client_interceptors(tracer_provider),
    ]
    return grpc.aio.insecure_channel(
        target,
        interceptors=interceptors,
        options=[
            # With a headless Service, DNS returns every replica; round_robin spreads calls
            # over them instead of pinning each caller to the first address.
            ("grpc.lb_policy_name", "round_robin"),
            # gRPC's default reconnect backoff grows to 120 s; a peer that restarts (the
            # embedder after an outage) should be found again within seconds.
            ("grpc.max_reconnect_backoff_ms", 5000),
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ],
    )

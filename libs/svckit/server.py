"""gRPC server bootstrap shared by every service.

A service's composition root builds its servicers, then hands them to `GrpcHost`, which adds
health (NOT_SERVING until the service says it is ready), reflection, tracing, the check of
every call's internal token and request context, binds the port exclusively (0 picks a free
one; a port in use raises svckit.ports.PortInUse) and shuts down gracefully on
SIGTERM/SIGINT. Given the service's metrics, it counts every RPC and serves them at
GET /metrics on their own listener (svckit.metrics).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace import TracerProvider

from svckit.interceptors import ContextInterceptor
from svckit.internal_auth import TokenVerifier
from svckit.metrics import MetricsEndpoint, MetricsSettings, ServiceMetrics
from svckit.ports import check_port_free, split_host_port
from svckit.telemetry import server_interceptors

log = logging.getLogger(__name__)

# Registers a servicer on a server, e.g. `lambda s: add_XServicer_to_server(impl, s)`.
Registration = Callable[[grpc.aio.Server], None]


@dataclass
class GrpcHost:
    """Owns one grpc.aio server and its health state."""

    service_names: Sequence[str]
    registrations: Sequence[Registration]
    address: str = "127.0.0.1:0"
    tracer_provider: TracerProvider | None = None
    grace_s: float = 5.0
    port: int = 0
    # Required: a host that authenticates nobody cannot be built by forgetting an argument.
    verifier: TokenVerifier = field(kw_only=True)
    # The service's series; None counts nothing. Served where `metrics_settings` says.
    metrics: ServiceMetrics | None = field(default=None, kw_only=True)
    metrics_settings: MetricsSettings = field(default_factory=MetricsSettings, kw_only=True)
    _endpoint: MetricsEndpoint | None = field(default=None, init=False)
    _server: grpc.aio.Server | None = field(default=None, init=False)
    _health: HealthServicer | None = field(default=None, init=False)

    async def start(self) -> int:
        """Starts serving (health NOT_SERVING) and returns the bound port."""
        counting = [self.metrics.interceptor()] if self.metrics is not None else []
        server = grpc.aio.server(
            # Counting first (outermost): it sees the code of a refused call too.
            interceptors=[
                *counting,
                *server_interceptors(self.tracer_provider),
                ContextInterceptor(self.verifier),
            ],
            options=[
                ("grpc.max_receive_message_length", 64 * 1024 * 1024),
                ("grpc.max_send_message_length", 64 * 1024 * 1024),
                # Exclusive: with SO_REUSEPORT (gRPC's default) a second server on this
                # port would share its connections instead of failing to start.
                ("grpc.so_reuseport", 0),
            ],
        )
        health_servicer = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        for register in self.registrations:
            register(server)
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        host, wanted = split_host_port(self.address)
        # Checked first so that the usual case is our one line, not gRPC core's error log;
        # the bind below still fails if the port is taken in between.
        check_port_free(host, wanted)
        try:
            self.port = server.add_insecure_port(self.address)
        except RuntimeError:  # grpc's "Failed to bind": say which port and who holds it
            self.port = 0
        if self.port == 0:
            check_port_free(host, wanted)  # raises PortInUse, naming the holder
            raise RuntimeError(f"could not bind {self.address}")
        await server.start()
        self._server, self._health = server, health_servicer
        if self.metrics is not None and self.metrics_settings.listen is not None:
            endpoint = MetricsEndpoint(
                self.metrics, self.metrics_settings.listen, self.metrics_settings.address_file
            )
            try:
                await endpoint.start()
            except BaseException:
                await server.stop(None)
                self._server = None
                raise
            self._endpoint = endpoint
        await self._set_all(health_pb2.HealthCheckResponse.NOT_SERVING)
        return self.port

    async def _set_all(
        self, status: health_pb2.HealthCheckResponse.ServingStatus.ValueType
    ) -> None:
        assert self._health is not None
        for name in ("", *self.service_names):
            await self._health.set(name, status)

    async def set_serving(self) -> None:
        await self._set_all(health_pb2.HealthCheckResponse.SERVING)

    async def set_health(self, name: str, serving: bool) -> None:
        """Reports one more health name beside the service's own (a dependency's verdict,
        e.g. cograph.embedding_space); nothing before start or after stop."""
        if self._health is None or self._server is None:
            return
        await self._health.set(
            name,
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING,
        )

    async def stop(self) -> None:
        """Flips health to NOT_SERVING first so balancers drain us, then stops with grace."""
        if self._server is None:
            return
        if self._health is not None:
            await self._health.enter_graceful_shutdown()
        await self._server.stop(self.grace_s)
        self._server = None
        if self._endpoint is not None:
            await self._endpoint.stop()
            self._endpoint = None

    @property
    def metrics_address(self) -> str:
        """`host:port` of /metrics; empty when not served."""
        return self._endpoint.address if self._endpoint is not None else ""

    async def wait(self) -> None:
        assert self._server is not None
        await self._server.wait_for_termination()


def write_ready_file(path: Path | None, port: int) -> None:
    """Tells a supervisor (cograph up, tests) which port we bound, atomically."""
    if path is None:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


async def wait_for_signal() -> signal.Signals:
    """Blocks until SIGTERM or SIGINT arrives and returns which one."""
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()

    def deliver(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, deliver, sig)
    try:
        return await received
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)

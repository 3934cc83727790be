"""Prometheus metrics of a gRPC service: its RPCs, its database pools, and the series the
service adds itself, served at GET /metrics on a port of their own.

Each service builds one `ServiceMetrics` in its composition root. Its registry is the
service's own, never prometheus_client's process-global one, so that several services in one
test process never share counters. Labels are bounded by construction: the gRPC method and
status code (methods the server defines; an unknown method is not counted under its name),
pool names and closed sets the services choose; never a repository, a query or a principal.

The endpoint is a small asyncio HTTP server rather than prometheus_client's threaded one:
it answers GET (and HEAD) /metrics alone, 404 elsewhere, reads at most a few KB of a request
with a deadline, and binds exclusively (svckit.ports) like every listener here.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from svckit.config import ConfigError, Env
from svckit.ports import bind_exclusive, split_host_port

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
# A scrape request is a request line and a few headers; anything longer is not one.
MAX_REQUEST_BYTES = 8192
# How long a connection may take to send its request (a client that opens and waits must
# not hold a task forever).
REQUEST_TIMEOUT_S = 5.0
# How long the refreshers (gauges read from the database at scrape time) may take together
# before the scrape answers with the values they last set.
REFRESH_TIMEOUT_S = 2.0
# Seconds; RPCs run from a millisecond (a cached route) to many seconds (an index request
# waiting for its clone), like the gateway's requests (services/gateway/metrics.py).
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
OFF = "off"

_HOST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def parse_listen(name: str, value: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) of a listener, checked: a literal address or a host
    name, and a port from 0 (the OS picks one) to 65535. Raises ConfigError naming `name`."""
    host, sep, port_text = value.strip().rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{name}: must be host:port, got {value!r}")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if bare != host or not _HOST_NAME.match(bare):
            raise ConfigError(f"{name}: {host!r} is not an address or a host name") from None
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"{name}: the port must be 0..65535, got {port_text!r}")
    return bare, int(port_text)


@dataclass(frozen=True)
class MetricsSettings:
    """Where a service serves /metrics (`None`: nowhere), and the file it writes that
    address to once listening (`cograph up` names `run/<service>.metrics`)."""

    listen: str | None = None
    address_file: Path | None = None

    @classmethod
    def from_env(cls, env: Env, service: str) -> MetricsSettings:
        prefix = service.upper()
        name = f"{prefix}_METRICS_LISTEN"
        listen = env.str(name, "127.0.0.1:0")
        address_file = env.optional_str(f"{prefix}_METRICS_FILE")
        if listen.strip().lower() == OFF:
            return cls(None, None)
        parse_listen(name, listen)
        return cls(listen.strip(), Path(address_file) if address_file else None)


class RpcMetrics:
    """RPCs handled, by gRPC service, method and status code, with their latency."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("grpc_service", "grpc_method", "grpc_code")
        self.handled = Counter(
            "cograph_grpc_server_handled_total",
            "RPCs completed, by gRPC service, method and status code.",
            labels,
            registry=registry,
        )
        self.latency = Histogram(
            "cograph_grpc_server_handling_seconds",
            "RPC latency (until the answer or the error), by gRPC service, method and status code.",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )

    def observe(self, full_method: str, code: grpc.StatusCode, seconds: float) -> None:
        service, method = split_method(full_method)
        labels = (service, method, code.name)
        self.handled.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)


def split_method(full_method: str) -> tuple[str, str]:
    """'/pkg.Service/Method' -> ('pkg.Service', 'Method')."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service, method


def _final_code(context: grpc.aio.ServicerContext[Any, Any]) -> grpc.StatusCode:
    """The code a handler ended with; grpc.aio reports None until one was set (OK)."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions hand back the numeric value
        for member in grpc.StatusCode:
            if member.value[0] == code:
                return member
    return grpc.StatusCode.OK


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every unary call by method and final code, refusals included: it is the
    outermost interceptor, so a call the ContextInterceptor refuses (UNAUTHENTICATED) or
    maps (a DomainError's code) is counted with the code the caller saw. Streaming methods
    (health Watch, reflection) are passed through uncounted; no service defines one."""

    def __init__(self, rpcs: RpcMetrics) -> None:
        self._rpcs = rpcs

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler: grpc.RpcMethodHandler | None = await continuation(handler_call_details)
        # None: a method this server does not define. Not counted, so a caller cannot
        # create series by naming methods.
        if handler is None or handler.request_streaming or handler.response_streaming:
            return handler  # type: ignore[return-value]
        method = handler_call_details.method
        inner: Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
        inner = handler.unary_unary  # type: ignore[assignment]
        rpcs = self._rpcs

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            start = time.perf_counter()
            code = grpc.StatusCode.UNKNOWN
            try:
                result = await inner(request, context)
                code = _final_code(context)
                return result
            except grpc.aio.AbortError:
                code = _final_code(context)
                raise
            except asyncio.CancelledError:
                code = grpc.StatusCode.CANCELLED  # the caller went away or its deadline passed
                raise
            finally:
                rpcs.observe(method, code, time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            unary_unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class _ObservedPool(Protocol):
    acquire_observer: Callable[[float, bool], None] | None

    def get_size(self) -> int: ...

    def get_idle_size(self) -> int: ...

    def get_max_size(self) -> int: ...


class PoolMetrics:
    """Waits for a pooled connection, and each pool's connections, by pool name (a name
    the service gives each of its pools: `requests`, `indexing`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.waits = Histogram(
            "cograph_db_pool_acquire_seconds",
            "Time spent waiting for a pooled database connection, by pool and outcome "
            "(ok, or timeout: COGRAPH_DB_ACQUIRE_TIMEOUT_S passed).",
            ("pool", "outcome"),
            registry=registry,
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.connections = Gauge(
            "cograph_db_pool_connections",
            "Database connections of each pool, by state (in_use, idle) and the pool's "
            "maximum (max).",
            ("pool", "state"),
            registry=registry,
        )

    def watch(self, pool: Any, name: str) -> None:
        """Observes every acquisition from `pool` (a svckit.db.BoundedPool)."""
        observed: _ObservedPool = pool
        waits = self.waits

        def acquired(seconds: float, timed_out: bool) -> None:
            waits.labels(name, "timeout" if timed_out else "ok").observe(seconds)

        observed.acquire_observer = acquired
        self.connections.labels(name, "in_use").set_function(
            lambda: float(observed.get_size() - observed.get_idle_size())
        )
        self.connections.labels(name, "idle").set_function(lambda: float(observed.get_idle_size()))
        self.connections.labels(name, "max").set_function(lambda: float(observed.get_max_size()))


Refresher = Callable[[], Awaitable[None]]


@dataclass
class ServiceMetrics:
    """One service's registry, with the series every gRPC service has; the service adds
    its own series to `registry`, and `refreshers` for gauges read at scrape time."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    refreshers: list[Refresher] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rpcs = RpcMetrics(self.registry)
        self.pools = PoolMetrics(self.registry)

    def interceptor(self) -> MetricsInterceptor:
        return MetricsInterceptor(self.rpcs)

    async def refresh(self) -> None:
        """Runs the refreshers, together, within REFRESH_TIMEOUT_S; a failure keeps that
        gauge's last value (the scrape still answers) and is logged."""
        if not self.refreshers:
            return
        results = await asyncio.gather(
            *(asyncio.wait_for(refresh(), REFRESH_TIMEOUT_S) for refresh in self.refreshers),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                log.warning("metrics refresh failed", extra={"error": repr(result)})

    async def exposition(self) -> bytes:
        await self.refresh()
        return generate_latest(self.registry)


def _response(status: str, body: bytes, content_type: str, extra: Sequence[str] = ()) -> bytes:
    head = [
        f"HTTP/1.1 {status}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def write_address_file(path: Path | None, address: str) -> None:
    """Tells a supervisor (cograph up) where the metrics are, atomically."""
    if path is None:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(f"{address}\n")
    os.replace(tmp, path)


class Exposable(Protocol):
    """What an endpoint serves: a ServiceMetrics, or the gateway's HTTP metrics."""

    async def exposition(self) -> bytes: ...


class MetricsEndpoint:
    """Serves one registry's exposition at GET /metrics on `listen` (`host:port`, 0 picks
    a port)."""

    def __init__(self, metrics: Exposable, listen: str, address_file: Path | None = None) -> None:
        self._metrics = metrics
        self._listen = listen
        self._address_file = address_file
        self._server: asyncio.Server | None = None
        self.address = ""  # host:port once listening

    async def start(self) -> str:
        """Binds (exclusively; a port in use raises svckit.ports.PortInUse), listens, writes
        the address file, and returns `host:port`."""
        host, port = split_host_port(self._listen)
        sock = bind_exclusive(host, port)
        try:
            self._server = await asyncio.start_server(
                self._serve, sock=sock, limit=MAX_REQUEST_BYTES
            )
        except BaseException:
            sock.close()
            raise
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.address = f"{shown}:{bound}"
        write_address_file(self._address_file, self.address)
        log.info("metrics serving", extra={"address": self.address})
        return self.address

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2.0)
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                writer.write(_response("400 Bad Request", b"bad request\n", "text/plain"))
                return
            writer.write(await self._answer(head))
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the client left; nothing to tell it
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, head: bytes) -> bytes:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _response("400 Bad Request", b"bad request\n", "text/plain")
        method, target, _ = parts
        path = target.split("?", 1)[0]
        if path != METRICS_PATH:
            return _response("404 Not Found", b"not found\n", "text/plain")
        if method not in ("GET", "HEAD"):
            return _response(
                "405 Method Not Allowed", b"method not allowed\n", "text/plain", ["Allow: GET"]
            )
        body = await self._metrics.exposition()
        response = _response("200 OK", body, CONTENT_TYPE_LATEST)
        if method == "HEAD":
            return response[: len(response) - len(body)]
        return response

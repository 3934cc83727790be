"""A real svckit GrpcHost counts its RPCs by method and the code the caller saw, and serves
them at GET /metrics on a listener of its own, over real gRPC and HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from svckit.errors import NotFound
from svckit.internal_auth import TokenVerifier
from svckit.metrics import MetricsSettings, ServiceMetrics
from svckit.ports import PortInUse, bind_exclusive
from svckit.server import GrpcHost
from tests.internal_auth import TEST_SECRET, signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

SERVICE = "test.Counted"


async def _echo(request: bytes, _: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    if request == b"missing":
        raise NotFound("no such thing")
    return request


def _host(metrics: ServiceMetrics, settings: MetricsSettings) -> GrpcHost:
    handlers = grpc.method_handlers_generic_handler(
        SERVICE, {"Echo": grpc.unary_unary_rpc_method_handler(_echo)}
    )
    return GrpcHost(
        [SERVICE],
        [lambda server: server.add_generic_rpc_handlers((handlers,))],
        verifier=TokenVerifier(TEST_SECRET.encode()),
        metrics=metrics,
        metrics_settings=settings,
    )


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _handled(code: str, method: str = "Echo") -> tuple[str, frozenset[tuple[str, str]]]:
    labels = {"grpc_service": SERVICE, "grpc_method": method, "grpc_code": code}
    return "cograph_grpc_server_handled_total", frozenset(labels.items())


async def test_rpcs_are_counted_by_code_and_served_at_metrics(tmp_path: Path) -> None:
    address_file = tmp_path / "counted.metrics"
    metrics = ServiceMetrics()
    host = _host(metrics, MetricsSettings("127.0.0.1:0", address_file))
    await host.start()
    try:
        target = f"127.0.0.1:{host.port}"
        none: Any = None
        async with signed_channel(target) as channel:
            echo = channel.unary_unary(f"/{SERVICE}/Echo", none, none)
            assert await echo(b"hello", timeout=10) == b"hello"
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await echo(b"missing", timeout=10)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            unknown = channel.unary_unary(f"/{SERVICE}/NoSuchMethod{'x' * 50}", none, none)
            with pytest.raises(grpc.aio.AioRpcError):
                await unknown(b"", timeout=10)
        async with grpc.aio.insecure_channel(target) as unsigned:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await unsigned.unary_unary(f"/{SERVICE}/Echo", none, none)(b"x", timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        # The file cograph up reads holds the address actually bound.
        address = address_file.read_text().strip()
        assert address == host.metrics_address and address.startswith("127.0.0.1:")
        assert not address.endswith(":0")
        async with httpx.AsyncClient(base_url=f"http://{address}", timeout=10) as client:
            scraped = await client.get("/metrics")
            assert scraped.status_code == 200
            assert scraped.headers["content-type"].startswith("text/plain")
            samples = _samples(scraped.text)
            assert samples[_handled("OK")] == 1
            assert samples[_handled("NOT_FOUND")] == 1
            assert samples[_handled("UNAUTHENTICATED")] == 1
            # A method the server does not define never becomes a label.
            assert "NoSuchMethod" not in scraped.text
            assert (await client.get("/")).status_code == 404
            assert (await client.get("/metrics/x")).status_code == 404
            assert (await client.post("/metrics", content=b"x")).status_code == 405

        # Not HTTP at all, or a request that never ends its head: 400, connection closed.
        host_part, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host_part, int(port))
        writer.write(b"\x16\x03\x01" + b"A" * 9000)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400")
    finally:
        await host.stop()
    assert host.metrics_address == ""


async def test_a_metrics_port_in_use_fails_the_start_naming_it() -> None:
    held = bind_exclusive("127.0.0.1", 0)
    held.listen()
    port = held.getsockname()[1]
    host = _host(ServiceMetrics(), MetricsSettings(f"127.0.0.1:{port}"))
    try:
        with pytest.raises(PortInUse, match=str(port)):
            await host.start()
    finally:
        held.close()
        await host.stop()

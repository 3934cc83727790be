"""OpenTelemetry tracing: OTLP export when an endpoint is configured, silent otherwise."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import (
    aio_client_interceptors,
    aio_server_interceptor,
    filters,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from svckit.config import Env

log = logging.getLogger(__name__)


def setup_tracing(service: str, env: Env) -> TracerProvider:
    """Builds this process's tracer provider and installs it as the global one.

    The global provider is OpenTelemetry's own registry (instrumentations look it up there);
    we set it exactly once per process, from the composition root.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": f"cograph-{service}"}))
    endpoint = env.optional_str("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        log.info("tracing to OTLP", extra={"endpoint": endpoint})
    trace.set_tracer_provider(provider)
    return provider


def server_interceptors(provider: TracerProvider | None) -> list[grpc.aio.ServerInterceptor]:
    # Health and reflection stay untraced: probes are noise, and the aio interceptor breaks
    # streaming handlers that are not async generators (health's Watch).
    untraced = filters.any_of(
        filters.service_prefix("grpc.health."), filters.service_prefix("grpc.reflection.")
    )
    return [aio_server_interceptor(tracer_provider=provider, filter_=filters.negate(untraced))]


def client_interceptors(provider: TracerProvider | None) -> Sequence[grpc.aio.ClientInterceptor]:
    return list(aio_client_interceptors(tracer_provider=provider))

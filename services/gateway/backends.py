"""The gRPC channels to the services the gateway fronts, and their health."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider

from cograph.commons.v1 import commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph.router.v1 import router_pb2_grpc
from cograph_api.embedding_space import HEALTH_NAME as SPACE_HEALTH_NAME
from cograph_api.embedding_space import MISMATCH_REASON
from gateway.errors import not_deployed
from svckit.clients import dial
from svckit.internal_auth import TokenSigner


@dataclass
class Backends:
    """One channel per configured backend; stubs are cheap and made per call."""

    channels: Mapping[str, grpc.aio.Channel]
    health_timeout_s: float = 2.0
    # Services the gateway never calls but reports in /readyz (the embedder), by name.
    probes: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    @classmethod
    def dial_all(
        cls,
        addrs: Mapping[str, str],
        *,
        timeout_s: float,
        health_timeout_s: float,
        signer: TokenSigner,
        tracer_provider: TracerProvider | None = None,
    ) -> Backends:
        # Every call is signed with the principal the auth middleware put in the request
        # context; backends refuse calls that are not.
        channels = {
            name: dial(
                addr, signer=signer, default_timeout_s=timeout_s, tracer_provider=tracer_provider
            )
            for name, addr in addrs.items()
        }
        return cls(channels, health_timeout_s)

    def channel(self, name: str) -> grpc.aio.Channel:
        channel = self.channels.get(name)
        if channel is None:
            raise not_deployed(name)
        return channel

    # The stubs are typed Any: grpc-stubs describes the sync API and these calls are aio.
    def commons(self) -> Any:
        return commons_pb2_grpc.CommonsServiceStub(self.channel("commons"))

    def retrieval(self) -> Any:
        return retrieval_pb2_grpc.RetrievalServiceStub(self.channel("retrieval"))

    def router(self) -> Any:
        return router_pb2_grpc.RouterServiceStub(self.channel("router"))

    async def _status(self, channel: grpc.aio.Channel, service: str = "") -> str:
        stub: Any = health_pb2_grpc.HealthStub(channel)
        try:
            reply = await stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=self.health_timeout_s
            )
        except grpc.aio.AioRpcError as err:
            return err.code().name.lower()
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)).lower()

    async def health(self) -> dict[str, str]:
        """Each configured backend's overall health status (serving, not_serving, ...)."""
        names = list(self.channels)
        statuses = await asyncio.gather(*(self._status(self.channels[n]) for n in names))
        return dict(zip(names, statuses, strict=True))

    async def probe_health(self) -> dict[str, str]:
        """The health of each probed dependency (the embedder), like health()."""
        names = list(self.probes)
        statuses = await asyncio.gather(*(self._status(self.probes[n]) for n in names))
        return dict(zip(names, statuses, strict=True))

    async def space_health(self) -> dict[str, str]:
        """What the backends that hold vectors (retrieval, commons) find when they compare
        the embedder's model with the one their vectors come from, by backend: "serving",
        or "embedding_model_mismatch". A backend that does not answer the check (down, or
        a version without it) is left out: its own health reports it."""
        names = [n for n in ("retrieval", "commons") if n in self.channels]
        statuses = await asyncio.gather(
            *(self._status(self.channels[n], SPACE_HEALTH_NAME) for n in names)
        )
        verdicts = {"serving": "serving", "not_serving": MISMATCH_REASON}
        return {
            name: verdicts[status]
            for name, status in zip(names, statuses, strict=True)
            if status in verdicts
        }

    async def close(self) -> None:
        for channel in (*self.channels.values(), *self.probes.values()):
            await channel.close(None)

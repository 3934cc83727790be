"""RouterService: protobuf in and out; the work is in routing.Router."""

from __future__ import annotations

import grpc

from cograph.router.v1 import router_pb2, router_pb2_grpc
from router.routing import Router


class RouterServicer(router_pb2_grpc.RouterServiceServicer):
    def __init__(self, router: Router) -> None:
        self._router = router

    async def Route(
        self, request: router_pb2.RouteRequest, context: grpc.aio.ServicerContext
    ) -> router_pb2.RouteResponse:
        # Presence, not zero, means "unset": an explicit 0 is out of range and is rejected.
        routing = await self._router.route(
            request.query,
            request.max_repositories if request.HasField("max_repositories") else None,
            request.max_collections if request.HasField("max_collections") else None,
        )
        return router_pb2.RouteResponse(
            repositories=[
                router_pb2.RoutedRepository(
                    slug=r.name, confidence=r.confidence, rationale=r.rationale
                )
                for r in routing.repositories
            ],
            collections=[
                router_pb2.RoutedCollection(
                    name=c.name, confidence=c.confidence, rationale=c.rationale
                )
                for c in routing.collections
            ],
        )

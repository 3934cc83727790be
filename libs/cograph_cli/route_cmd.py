"""`cograph route QUESTION [--json]`: which repositories and collections a question belongs to.

The router is addressed by ROUTER_ADDR (
else the port the stack in COGRAPH_DATA_DIR wrote, else 127.0.0.1:50053). Like every operator
command, the call acts as the local operator, an admin (cograph_cli.identity: principal
`admin` unless COGRAPH_PRINCIPAL names another), signed with the internal secret, so it
routes over every repository and collection, the private ones `cograph index` just made
included. `--json` prints the REST body of POST /api/route.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import grpc

from cograph.router.v1 import router_pb2, router_pb2_grpc
from cograph_cli.cli_errors import print_error
from cograph_cli.identity import OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel
from svckit.errors import reason_of

TIMEOUT_S = 30.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "route", help="which repositories and collections a question belongs to"
    )
    parser.add_argument("question")
    parser.add_argument("--max-repositories", type=int, default=None, help="1..20 (default 3)")
    parser.add_argument("--max-collections", type=int, default=None, help="1..20 (default 3)")
    parser.add_argument("--json", action="store_true", help="print the REST response body")
    parser.set_defaults(handler=run_route)


def response_body(reply: router_pb2.RouteResponse) -> dict[str, list[dict[str, Any]]]:
    """The REST body: {repositories: [{slug, confidence, rationale}], collections: [...]}."""
    return {
        "repositories": [
            {"slug": r.slug, "confidence": r.confidence, "rationale": r.rationale}
            for r in reply.repositories
        ],
        "collections": [
            {"name": c.name, "confidence": c.confidence, "rationale": c.rationale}
            for c in reply.collections
        ],
    }


def _request(args: argparse.Namespace) -> router_pb2.RouteRequest:
    request = router_pb2.RouteRequest(query=args.question)
    # Only set what was given: presence means "asked for", absence means the server default.
    if args.max_repositories is not None:
        request.max_repositories = args.max_repositories
    if args.max_collections is not None:
        request.max_collections = args.max_collections
    return request


async def _call(request: router_pb2.RouteRequest) -> router_pb2.RouteResponse:
    metadata = OperatorIdentity.from_env().metadata()
    async with operator_channel(service_address("router")) as channel:
        stub = router_pb2_grpc.RouterServiceStub(channel)
        reply: router_pb2.RouteResponse = await stub.Route(
            request, metadata=metadata, timeout=TIMEOUT_S
        )
        return reply


def _print_text(body: dict[str, list[dict[str, Any]]]) -> None:
    print("repositories:")
    if not body["repositories"]:
        print("  (none matched)")
    for repo in body["repositories"]:
        print(f"  {repo['confidence']:.2f}  {repo['slug']}  {repo['rationale']}")
    print("collections:")
    if not body["collections"]:
        print("  (none readable)")
    for coll in body["collections"]:
        print(f"  {coll['confidence']:.2f}  {coll['name']}  {coll['rationale']}")


def run_route(args: argparse.Namespace) -> int:
    try:
        reply = asyncio.run(_call(_request(args)))
    except grpc.aio.AioRpcError as err:
        code = reason_of(err) or err.code().name.lower()
        print_error(args.json, code, err.details())
        return 1
    body = response_body(reply)
    if args.json:
        print(json.dumps(body))
    else:
        _print_text(body)
    return 0

"""`cograph keys create|list|revoke`: API key administration through the gateway.

Needs an admin key: COGRAPH_API_KEY, else $COGRAPH_DATA_DIR/admin.key (written by the first
`cograph up`). The gateway is COGRAPH_GATEWAY_URL (default http://127.0.0.1:8080).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from gateway import models
from gateway.errors import ApiError
from gateway.rest_client import ClientConfig, RestClient


def register(subparsers: argparse._SubParsersAction) -> None:
    keys = subparsers.add_parser("keys", help="create, list and revoke API keys (admin)")
    actions = keys.add_subparsers(dest="keys_command", required=True)

    create = actions.add_parser("create", help="create a key; its secret is printed once")
    create.add_argument("--name", required=True, help="a label, e.g. ci-bot")
    create.add_argument("--principal", default=None, help="who the key acts for (default: name)")
    create.add_argument("--admin", action="store_true", help="an admin key (reads everything)")
    create.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="SLUG|COLLECTION",
        help="read access to a repository (host/owner/name) or a collection; repeatable",
    )
    create.add_argument("--json", action="store_true")
    create.set_defaults(handler=_create)

    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_list)

    revoke = actions.add_parser("revoke", help="revoke a key by id; it stops working at once")
    revoke.add_argument("key_id")
    revoke.add_argument("--json", action="store_true")
    revoke.set_defaults(handler=_revoke)


def _run(args: argparse.Namespace, call: Callable[[RestClient], Awaitable[Any]]) -> Any:
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


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ApiError as err:
            if getattr(args, "json", False):
                print(json.dumps(err.body()))
            else:
                print(f"error: {err.error}: {err.detail}", file=sys.stderr)
            return 1

    return wrapped


@_guarded
def _create(args: argparse.Namespace) -> int:
    # Slugs are host/owner/name; collection names have no slash.
    repositories = [g for g in args.grant if "/" in g]
    collections = [g for g in args.grant if "/" not in g]
    try:
        request = models.NewKey(
            name=args.name,
            principal_id=args.principal,
            admin=args.admin,
            grant_repositories=repositories,
            grant_collections=collections,
        )
    except ValidationError as err:
        raise ApiError(400, "invalid_argument", str(err.errors()[0]["msg"])) from None
    key = _run(args, lambda client: client.create_key(request))
    if args.json:
        print(json.dumps(key))
        return 0
    role = "admin" if key["admin"] else "principal"
    print(f"created key {key['id']} ({role} {key['principal_id']})")
    print(f"  {key['key']}")
    print("store it now: it is not shown again")
    return 0


@_guarded
def _list(args: argparse.Namespace) -> int:
    body = _run(args, lambda client: client.list_keys())
    if args.json:
        print(json.dumps(body))
        return 0
    for key in body["keys"]:
        state = f"revoked {key['revoked_at']}" if key["revoked_at"] else "active"
        admin = " admin" if key["admin"] else ""
        used = key["last_used_at"] or "never"
        print(
            f"{key['id']}  {key['key_prefix']}…  {key['name']} -> {key['principal_id']}{admin}"
            f"  {state}  last used {used}"
        )
    return 0


@_guarded
def _revoke(args: argparse.Namespace) -> int:
    _run(args, lambda client: client.revoke_key(args.key_id))
    if args.json:
        print(json.dumps({"id": args.key_id, "revoked": True}))
    else:
        print(f"revoked {args.key_id}")
    return 0

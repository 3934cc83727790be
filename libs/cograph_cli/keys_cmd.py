"""`cograph keys create|list|revoke`: API key administration through the gateway.

Needs an admin key (see cograph_cli.rest_calls for where it is found).
"""

from __future__ import annotations

import argparse
import json

from pydantic import ValidationError

from cograph_cli.rest_calls import call_gateway, guarded, invalid_argument
from gateway import models


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


@guarded
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
        raise invalid_argument(err) from None
    key = call_gateway(lambda client: client.create_key(request))
    if args.json:
        print(json.dumps(key))
        return 0
    role = "admin" if key["admin"] else "principal"
    print(f"created key {key['id']} ({role} {key['principal_id']})")
    print(f"  {key['key']}")
    print("store it now: it is not shown again")
    return 0


@guarded
def _list(args: argparse.Namespace) -> int:
    body = call_gateway(lambda client: client.list_keys())
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


@guarded
def _revoke(args: argparse.Namespace) -> int:
    call_gateway(lambda client: client.revoke_key(args.key_id))
    if args.json:
        print(json.dumps({"id": args.key_id, "revoked": True}))
    else:
        print(f"revoked {args.key_id}")
    return 0

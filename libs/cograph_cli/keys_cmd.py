"""`cograph keys create|list|revoke`: API key administration through the gateway.

Needs an admin key (see cograph_cli.rest_calls for where it is found). A principal is one
identity: a reserved name (cograph_api.limits.RESERVED_PRINCIPALS) is refused, and so is a
principal that another key has, unless `--existing-principal` asks for a second key for it
with the same admin flag (rotation).

`cograph keys bootstrap` is the exception: it writes the first admin key straight into the
gateway's key table (COGRAPH_DATABASE_URL), for a deployment where nobody holds a key yet.
On Kubernetes it runs as the gateway's `bootstrap-admin` initContainer with the key from
the `cograph-admin` Secret (deploy/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from pydantic import ValidationError

from cograph_api import rest_models as models
from cograph_api.admin_keys import BootstrapOutcome, bootstrap_admin_key
from cograph_cli.cli_errors import print_error
from cograph_cli.rest_calls import call_gateway, guarded, invalid_argument
from cograph_cli.services import gateway_migrations
from svckit.config import Env

KEY_FILE_ENV = "COGRAPH_ADMIN_KEY_FILE"
KEY_ENV = "COGRAPH_ADMIN_KEY"


def register(subparsers: argparse._SubParsersAction) -> None:
    keys = subparsers.add_parser("keys", help="create, list and revoke API keys (admin)")
    actions = keys.add_subparsers(dest="keys_command", required=True)

    create = actions.add_parser("create", help="create a key; its secret is printed once")
    create.add_argument("--name", required=True, help="a label, e.g. ci-bot")
    create.add_argument("--principal", default=None, help="who the key acts for (default: name)")
    create.add_argument("--admin", action="store_true", help="an admin key (reads everything)")
    create.add_argument(
        "--existing-principal",
        action="store_true",
        help="add another key for a principal that has one (rotation; same --admin as its keys)",
    )
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

    bootstrap = actions.add_parser(
        "bootstrap",
        help="store a provided admin key in the database (first start; idempotent)",
        description=(
            f"Reads an admin key from --key-file, ${KEY_FILE_ENV} or ${KEY_ENV} and stores "
            "its hash in COGRAPH_DATABASE_URL unless it is already there. The key must look "
            "like a generated one: cg_ and at least 32 letters, digits, '-' or '_' (e.g. "
            "cg_$(openssl rand -hex 32)). The key is never printed."
        ),
    )
    bootstrap.add_argument("--key-file", type=Path, default=None, help=f"default: ${KEY_FILE_ENV}")
    bootstrap.add_argument("--name", default="admin", help="the key's label (default: admin)")
    bootstrap.add_argument(
        "--if-present",
        action="store_true",
        help="succeed without doing anything when no key is provided (the Secret is optional)",
    )
    bootstrap.set_defaults(handler=_bootstrap)


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
            existing_principal=args.existing_principal,
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


def _provided_key(args: argparse.Namespace) -> str | None:
    """The key from the file (argument or env) or the env var; None when none is given."""
    path = args.key_file or (
        Path(os.environ[KEY_FILE_ENV]) if os.environ.get(KEY_FILE_ENV) else None
    )
    if path is not None:
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8")
    return os.environ.get(KEY_ENV) or None


def _bootstrap(args: argparse.Namespace) -> int:
    secret = _provided_key(args)
    if secret is None:
        if args.if_present:
            print("no admin key provided; nothing to do")
            return 0
        print_error(
            False,
            "invalid_argument",
            f"no admin key: pass --key-file, or set {KEY_FILE_ENV} or {KEY_ENV}",
        )
        return 2
    dsn = Env().str("COGRAPH_DATABASE_URL")  # a ConfigError is reported by main
    try:
        outcome, key_id = asyncio.run(
            bootstrap_admin_key(dsn, secret, gateway_migrations(), name=args.name)
        )
    except ValueError as err:
        # The message never quotes the key (admin_keys.check_provided_key).
        print_error(False, "invalid_argument", str(err))
        return 2
    if outcome is BootstrapOutcome.CREATED:
        print(f"admin key {key_id} stored")
    elif outcome is BootstrapOutcome.EXISTS:
        print(f"admin key {key_id} already stored; nothing changed")
    else:
        print(f"admin key {key_id} was revoked; it stays revoked (provide a new key)")
    return 0

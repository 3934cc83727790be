"""`cograph access grant|revoke|public|private`: who may read (or re-index) a repository or
collection.

Admin only, through the gateway (see cograph_cli.rest_calls for where the key is found).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from cograph_api import rest_models as models
from cograph_cli.rest_calls import call_gateway, guarded, invalid_argument


def _target_options(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--repo", metavar="SLUG", help="a repository (host/owner/name)")
    target.add_argument("--collection", metavar="NAME", help="a markdown collection")
    parser.add_argument("--json", action="store_true")


def register(subparsers: argparse._SubParsersAction) -> None:
    access = subparsers.add_parser(
        "access", help="grant or revoke read/write access; make sources public or private (admin)"
    )
    actions = access.add_subparsers(dest="access_command", required=True)
    for name, text, role_help in (
        (
            "grant",
            "let a principal read (or also re-index) a repository or collection",
            "read: search and read (default); write: also re-index and change the source",
        ),
        (
            "revoke",
            "take a principal's grant away, or only its write role",
            "read: remove the grant (default); write: keep it as a read grant",
        ),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("principal", help="the principal id an API key acts for")
        action.add_argument("--role", choices=("read", "write"), default="read", help=role_help)
        _target_options(action)
        action.set_defaults(handler=_grant_or_revoke)
    for name, text in (
        ("public", "every key may read it"),
        ("private", "only admins and granted principals may read it"),
    ):
        action = actions.add_parser(name, help=text)
        _target_options(action)
        action.set_defaults(handler=_visibility, public=name == "public")


def _grant_request(args: argparse.Namespace) -> models.AccessGrant:
    try:
        return models.AccessGrant(
            principal_id=args.principal,
            repository=args.repo,
            collection=args.collection,
            role=args.role,
        )
    except ValidationError as err:
        raise invalid_argument(err) from None


def _what(args: argparse.Namespace) -> str:
    return f"repository {args.repo}" if args.repo else f"collection {args.collection}"


def _report(args: argparse.Namespace, reply: dict[str, Any], done: str, already: str) -> int:
    if args.json:
        print(json.dumps(reply))
    else:
        print(done if reply["changed"] else already)
    return 0


@guarded
def _grant_or_revoke(args: argparse.Namespace) -> int:
    request = _grant_request(args)
    who, what = args.principal, _what(args)
    verb = "read" if args.role == "read" else "re-index"
    if args.access_command == "grant":
        reply = call_gateway(lambda client: client.grant(request))
        return _report(
            args, reply, f"{who} may now {verb} {what}", f"{who} could already {verb} {what}"
        )
    reply = call_gateway(lambda client: client.revoke(request))
    if args.role == "write":
        return _report(
            args,
            reply,
            f"{who} may no longer re-index {what} (still read it)",
            f"{who} had no write grant on {what}",
        )
    return _report(args, reply, f"revoked {who}'s grant on {what}", f"{who} had no grant on {what}")


@guarded
def _visibility(args: argparse.Namespace) -> int:
    try:
        request = models.Visibility(
            repository=args.repo, collection=args.collection, public=args.public
        )
    except ValidationError as err:
        raise invalid_argument(err) from None
    reply = call_gateway(lambda client: client.set_visibility(request))
    what, state = _what(args), "public" if args.public else "private"
    return _report(args, reply, f"{what} is now {state}", f"{what} was already {state}")

"""The operator commands' one identity (cograph_cli.identity)."""

from __future__ import annotations

import argparse
import inspect

from cograph_api import admin_keys
from cograph_cli import notes_cmd
from cograph_cli.identity import OPERATOR_PRINCIPAL, OperatorIdentity, service_address
from svckit.config import Env


def test_the_operator_is_the_admin_keys_principal() -> None:
    # `cograph keys`/`access`/`mcp` go through the gateway with the admin key `cograph up`
    # made; the direct commands must act for the same principal.
    default = inspect.signature(admin_keys.bootstrap_admin_key).parameters["principal_id"]
    assert OPERATOR_PRINCIPAL == default.default == "admin"
    assert OperatorIdentity.from_env(Env({})).metadata() == (
        ("x-cograph-principal", "admin"),
        ("x-cograph-admin", "1"),
    )


def test_cograph_principal_and_as_name_another_principal_still_admin() -> None:
    env = Env({"COGRAPH_PRINCIPAL": "ops-bot"})
    assert OperatorIdentity.from_env(env).principal == "ops-bot"
    assert OperatorIdentity.from_env(env, as_principal="reviewer").metadata() == (
        ("x-cograph-principal", "reviewer"),
        ("x-cograph-admin", "1"),
    )
    assert OperatorIdentity.from_env(env, as_principal="  ").principal == "ops-bot"
    assert OperatorIdentity.from_env(Env({"COGRAPH_PRINCIPAL": ""})).principal == "admin"


def test_service_addresses() -> None:
    assert service_address("router", Env({})) == "127.0.0.1:50053"
    assert service_address("commons", Env({"COMMONS_ADDR": "10.0.0.5:7"})) == "10.0.0.5:7"


def test_every_notes_action_takes_as() -> None:
    parser = argparse.ArgumentParser(prog="cograph")
    notes_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["notes", "vote", "p1", "up", "--as", "reviewer", "--json"])
    assert (args.as_principal, args.direction, args.json) == ("reviewer", "up", True)
    assert parser.parse_args(["notes", "search", "retry"]).as_principal is None

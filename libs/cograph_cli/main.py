"""The `cograph` command: one entry point, one module per command group."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from cograph_cli.cli_errors import EXIT_USAGE, CographParser, print_error, wants_json
from svckit.config import ConfigError

# Top-level command -> the module that registers it. Each module exposes
# register(subparsers) and sets `handler(args) -> int` on its parsers. Only the module a
# command needs is imported: some pull in heavy dependencies (the MCP server, tqdm, …), and
# `cograph migrate` runs in every pod's start-up.
COMMANDS: dict[str, str] = {
    "up": "cograph_cli.up",
    "migrate": "cograph_cli.migrate_cmd",
    "reembed": "cograph_cli.reembed_cmd",
    "index": "cograph_cli.index_cmd",
    "collection": "cograph_cli.index_cmd",
    "repos": "cograph_cli.catalog_cmd",
    "collections": "cograph_cli.catalog_cmd",
    "search": "cograph_cli.search_cmd",
    "grep": "cograph_cli.grep_cmd",
    "route": "cograph_cli.route_cmd",
    "notes": "cograph_cli.notes_cmd",
    "keys": "cograph_cli.keys_cmd",
    "access": "cograph_cli.access_cmd",
    "credentials": "cograph_cli.credentials_cmd",
    "mcp": "cograph_cli.mcp_cmd",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for one command, or for all of them (help, unknown commands)."""
    parser = CographParser(
        prog="cograph", description="Cograph: a context engine for coding agents."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    wanted = [COMMANDS[command]] if command in COMMANDS else list(COMMANDS.values())
    for name in dict.fromkeys(wanted):
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    args = build_parser(command).parse_args(arguments)
    try:
        code: int = args.handler(args)
    except ConfigError as err:
        # A missing or bad setting (e.g. no internal secret) is the operator's to fix: say
        # which variable, without a traceback.
        print_error(wants_json(arguments), "configuration", str(err))
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())

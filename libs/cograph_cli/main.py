"""The `cograph` command: one entry point, one module per command group."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

# Each module exposes register(subparsers) and sets `handler(args) -> int` on its parsers.
COMMAND_MODULES: tuple[str, ...] = (
    "cograph_cli.up",
    "cograph_cli.index_cmd",
    "cograph_cli.notes_cmd",
    "cograph_cli.keys_cmd",
    "cograph_cli.mcp_cmd",
    "cograph_cli.migrate_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cograph", description="Cograph: a context engine for coding agents."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

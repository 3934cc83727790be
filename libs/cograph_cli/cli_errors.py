"""How the operator commands report a failure: one style for every command.

`error: <code>: <detail>` on stderr, or `{"error", "detail"}` on stdout with `--json`; the
code is the service's machine reason (svckit.errors.reason_of) when it sent one, else the
gRPC status in lower case. A command line that does not parse is the code `usage`, after
the usage line of the command that was meant (exit 2), and names the choices of a command
group in words, not the parser's internal names.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

import grpc

from svckit.errors import reason_of

USAGE = "usage"
# Exit status of a command line or request that is malformed (argparse's own too).
EXIT_USAGE = 2

_INVALID_CHOICE = re.compile(r"^argument (?P<dest>\S+): invalid choice: (?P<given>'.*?') \(")
_REQUIRED = "the following arguments are required: "


def print_error(as_json: bool, code: str, detail: str | None) -> None:
    if as_json:
        print(json.dumps({"error": code, "detail": detail}))
    else:
        print(f"error: {code}: {detail}", file=sys.stderr)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON, read before (or without) parsing it."""
    return "--json" in argv


class CographParser(argparse.ArgumentParser):
    """argparse with the commands' error style; every sub-command parser is one too."""

    _json = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A command line that fails to parse is reported as JSON when it asked for JSON.
        self._json = wants_json(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        as_json = self._json
        if not as_json:
            self.print_usage(sys.stderr)
        print_error(as_json, USAGE, self._plain(message))
        sys.exit(EXIT_USAGE)

    def _plain(self, message: str) -> str:
        """argparse names a command group by its internal `dest`; say `command` and list
        the choices instead, so the message reads as the command line does."""
        groups = {
            action.dest: list(action.choices or ())
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
        }
        invalid = _INVALID_CHOICE.match(message)
        if invalid and invalid["dest"] in groups:
            known = ", ".join(groups[invalid["dest"]])
            return f"unknown command {invalid['given']} for {self.prog}: one of {known}"
        if message.startswith(_REQUIRED):
            missing = message.removeprefix(_REQUIRED).split(", ")
            for dest, choices in groups.items():
                if dest in missing:
                    return f"{self.prog} needs a command: one of {', '.join(choices)}"
        return message


def report_rpc_error(
    err: grpc.aio.AioRpcError, *, as_json: bool, service: str, address: str
) -> int:
    """Prints a failed call to `service` at `address`; the exit status: 2 for a request
    the service refused as malformed, 1 otherwise."""
    reason = reason_of(err)
    code = reason or err.code().name.lower()
    detail = err.details() or code
    if err.code() == grpc.StatusCode.UNAVAILABLE and not reason:
        detail = f"{service} service not reachable at {address}"
    print_error(as_json, code, detail)
    return EXIT_USAGE if err.code() == grpc.StatusCode.INVALID_ARGUMENT else 1

"""`--anchor` on the command line: `REPO:SYMBOL` or `REPO:PATH:START-END`.

A slug (host/owner/name) has no ':', so the first ':' ends it; what follows is a line range
when it ends in `:START-END` (digits), else a symbol (which may hold '.' or '::'). Each
anchor is checked here with the same rules as the service (cograph_api.anchors), so a
malformed one is refused before any call, naming the option and what was wrong.
"""

from __future__ import annotations

import argparse
import re

from cograph.commons.v1 import commons_pb2
from cograph_api.anchors import Target, check_count, check_target
from svckit.errors import InvalidArgument

_LINES = re.compile(r"^(?P<path>.+):(?P<start>[0-9]+)-(?P<end>[0-9]+)$")
USAGE = "REPO:SYMBOL or REPO:PATH:START-END"


def parse_anchor(text: str, index: int = 0) -> Target:
    """One `--anchor` value as a checked target; ValueError saying what is wrong."""
    repo, sep, rest = text.strip().partition(":")
    if not sep or not repo.strip() or not rest.strip():
        raise ValueError(f"--anchor {text!r}: expected {USAGE}")
    lines = _LINES.match(rest)
    if lines:
        given = Target(repo, "", lines["path"], int(lines["start"]), int(lines["end"]))
    else:
        given = Target(repo, rest, "", 0, 0)
    try:
        return check_target(index, given)
    except InvalidArgument as err:
        # The service's own check, named after the option the value came from.
        raise ValueError(f"--anchor {text!r}: {err.message}") from None


def anchor_targets(values: list[str], *, required: bool = False) -> list[commons_pb2.AnchorTarget]:
    """Every `--anchor` as the request's AnchorTargets; ValueError for the first bad one."""
    if required and not values:
        raise ValueError(f"give at least one --anchor {USAGE}")
    targets = [parse_anchor(v, i) for i, v in enumerate(values)]
    try:
        check_count(len(targets))
    except InvalidArgument as err:
        raise ValueError(f"--anchor: {err.message}") from None
    return [
        commons_pb2.AnchorTarget(
            repo=t.repo, symbol=t.symbol, path=t.path, start_line=t.start_line, end_line=t.end_line
        )
        for t in targets
    ]


def add_anchor_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--anchor",
        action="append",
        default=[],
        dest="anchors",
        metavar="REPO:SYMBOL|REPO:PATH:START-END",
        help=help_text,
    )

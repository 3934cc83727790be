"""`cograph grep PATTERN`: grep over the indexed files of one repository or of all of them.

Like `cograph search`, it talks to retrieval directly (RETRIEVAL_ADDR, else the port the
stack in COGRAPH_DATA_DIR wrote, else 127.0.0.1:50052) as the local operator, an admin
(cograph_cli.identity), so without --repo it searches every indexed repository. The text
output reads like grep's: `repo:path:line:text` for a match, `repo:path-line-text` for a
context line, `--` between groups that do not touch; `--json` prints the body of POST
/api/grep.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import grpc

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api import limits
from cograph_api.proto_json import to_json
from cograph_cli.cli_errors import report_rpc_error
from cograph_cli.identity import OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel

# Longer than grep's own 5 s statement timeout, so the service's clear error comes back.
TIMEOUT_S = 30.0
CR = "\r"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `grep`; sets `handler(args) -> int`."""
    parser = subparsers.add_parser(
        "grep", help="find lines in the indexed files (one repository, or all of them)"
    )
    parser.add_argument("pattern", help="literal text, or a regular expression with -E")
    parser.add_argument(
        "--repo", default="", help="one repository (host/owner/name); all when omitted"
    )
    parser.add_argument(
        "-E", "--regex", action="store_true", help="read PATTERN as a POSIX regular expression"
    )
    parser.add_argument(
        "-i", "--ignore-case", action="store_true", help="match letters in either case"
    )
    parser.add_argument(
        "-C",
        "--context",
        type=int,
        default=0,
        metavar="N",
        help=f"N lines before and after each match ({limits.GREP_CONTEXT_MIN}.."
        f"{limits.GREP_CONTEXT_MAX})",
    )
    parser.add_argument("--glob", default="", help="only paths matching this glob (* matches /)")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"matching lines ({limits.GREP_LIMIT_MIN}..{limits.GREP_LIMIT_MAX}, "
        f"default {limits.GREP_LIMIT_DEFAULT})",
    )
    parser.add_argument("--json", action="store_true", help="print the REST response body")
    parser.set_defaults(handler=run_grep)


def build_request(args: argparse.Namespace) -> pb.GrepRequest:
    request = pb.GrepRequest(
        repo=args.repo,
        pattern=args.pattern,
        regex=args.regex,
        path_glob=args.glob,
        case_insensitive=args.ignore_case,
        context=args.context,
    )
    if args.limit is not None:  # unset: the service's default
        request.limit = args.limit
    return request


def run_grep(args: argparse.Namespace) -> int:
    address = service_address("retrieval")
    try:
        reply = asyncio.run(_call(build_request(args), address))
    except grpc.aio.AioRpcError as err:
        return report_rpc_error(err, as_json=args.json, service="retrieval", address=address)
    if args.json:
        print(json.dumps(response_body(reply), indent=2))
    else:
        print(render(reply))
    return 0


async def _call(request: pb.GrepRequest, address: str) -> pb.GrepResponse:
    metadata = OperatorIdentity.from_env().metadata()
    async with operator_channel(address) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        reply: pb.GrepResponse = await stub.Grep(request, metadata=metadata, timeout=TIMEOUT_S)
        return reply


def response_body(reply: pb.GrepResponse) -> dict[str, Any]:
    """The REST body of POST /api/grep."""
    body: dict[str, Any] = to_json(reply)
    return body


def render(reply: pb.GrepResponse) -> str:
    """grep's own layout: `repo:path:line:text` for a matching line, `repo:path-line-text`
    for a context line (once, where the contexts of two matches overlap, and a matching
    line is always shown as one), `--` between groups of lines that do not touch."""
    lines: dict[tuple[str, str], dict[int, tuple[str, str]]] = {}
    for match in reply.matches:
        shown = lines.setdefault((match.repo, match.path), {})
        first = match.line - len(match.before)
        for offset, text in enumerate(match.before):
            shown.setdefault(first + offset, ("-", text))
        for offset, text in enumerate(match.after):
            shown.setdefault(match.line + 1 + offset, ("-", text))
        shown[match.line] = (":", match.text)
    with_context = any(m.before or m.after for m in reply.matches)
    out: list[str] = []
    for (repo, path), shown in lines.items():
        where = f"{repo}:{path}" if repo else path
        previous: int | None = None
        for line in sorted(shown):
            if with_context and out and (previous is None or line > previous + 1):
                out.append("--")
            mark, text = shown[line]
            # A CRLF file's lines keep their '\r' (as indexed); a terminal would jump back.
            out.append(f"{where}{mark}{line}{mark}{text.removesuffix(CR)}")
            previous = line
    if not reply.matches:
        out.append("(no match)")
    elif reply.truncated:
        out.append("(more lines matched: raise --limit, or narrow the pattern or --glob)")
    return "\n".join(out)

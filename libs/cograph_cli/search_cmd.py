"""`cograph search QUERY`: hybrid search on the retrieval service over gRPC.

Like `cograph index`, it talks to retrieval directly (RETRIEVAL_ADDR,
else the port the stack in COGRAPH_DATA_DIR wrote, else
127.0.0.1:50052) as an operator, with admin principal metadata signed with the internal
secret; the gateway is the door for agents. `--json` prints the REST response body in the
form REST and MCP answer by default (compact: cograph_api.search_forms), `--json --verbose`
the full one: snake_case proto field names, enums as their short lower-case names, absent
optional scores as null.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api import limits
from cograph_api.proto_json import enum_name, to_json
from cograph_api.search_forms import answer_form
from cograph_cli.cli_errors import report_rpc_error
from cograph_cli.identity import OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel

LAYERS = limits.LAYERS
STREAMS = ("vector", "lexical", "symbol")
_SNIPPET_LINES = 8  # human output shows the head of each snippet


def _metadata() -> tuple[tuple[str, str], ...]:
    return OperatorIdentity.from_env().metadata()


def _address() -> str:
    return service_address("retrieval")


def parse_time(text: str) -> datetime:
    """ISO 8601 (`2024-03-01`, `2024-03-01T12:00:00Z`, with an offset); naive means UTC."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `search`; sets `handler(args) -> int`."""
    search = subparsers.add_parser(
        "search", help="hybrid search (symbol, lexical, semantic) over indexed code and docs"
    )
    search.add_argument("query", help="a symbol, a signature fragment or a question")
    search.add_argument("--repo", default="", help="scope to one repository (host/owner/name)")
    search.add_argument(
        "--ref",
        default="",
        help="search this indexed branch or tag of --repo instead of its default",
    )
    search.add_argument("--collection", default="", help="search one markdown collection")
    search.add_argument(
        "--layer",
        action="append",
        choices=LAYERS,
        default=[],
        help="result layer (repeatable); default code, ast_summary and repo_doc",
    )
    search.add_argument(
        "--top-k",
        type=int,
        default=None,
        help=f"results to return ({limits.TOP_K_MIN}..{limits.TOP_K_MAX})",
    )
    search.add_argument(
        "--snippet-chars",
        type=int,
        default=None,
        help=(
            f"snippet width ({limits.SNIPPET_CHARS_MIN}..{limits.SNIPPET_CHARS_MAX}, "
            f"default {limits.SNIPPET_CHARS_DEFAULT})"
        ),
    )
    search.add_argument(
        "--graph", action="store_true", help="add callers, callees and parents (needs --repo)"
    )
    search.add_argument("--since", type=parse_time, help="only content changed at/after T")
    search.add_argument("--until", type=parse_time, help="only content changed at/before T")
    search.add_argument("--as-of", type=parse_time, help="only content that existed at T")
    search.add_argument(
        "--stream", action="append", choices=STREAMS, default=[], help=argparse.SUPPRESS
    )
    search.add_argument(
        "--explain",
        action="store_true",
        help="say why each result ranks where it does (each ranking stage's effect)",
    )
    search.add_argument(
        "--skip-stage",
        action="append",
        choices=limits.SKIPPABLE_STAGES,
        default=[],
        help="rank without this stage (repeatable; evaluation)",
    )
    search.add_argument("--json", action="store_true", help="print the REST response body")
    search.add_argument(
        "--verbose", action="store_true", help="with --json: every field of every result"
    )
    search.set_defaults(handler=run_search)


def _stamp(moment: datetime | None) -> Timestamp | None:
    if moment is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def build_request(args: argparse.Namespace) -> pb.SearchRequest:
    request = pb.SearchRequest(
        query=args.query,
        repo=args.repo,
        ref=args.ref,
        collection=args.collection,
        layers=[pb.Layer.Value(f"LAYER_{name.upper()}") for name in args.layer],
        include_graph=args.graph,
        as_of=_stamp(args.as_of),
        since=_stamp(args.since),
        until=_stamp(args.until),
        streams=[pb.Stream.Value(f"STREAM_{name.upper()}") for name in args.stream],
        explain=args.explain,
        skip_stages=args.skip_stage,
    )
    if args.top_k is not None:
        request.top_k = args.top_k
    if args.snippet_chars is not None:
        request.snippet_chars = args.snippet_chars
    return request


def run_search(args: argparse.Namespace) -> int:
    return asyncio.run(_search(build_request(args), args.json, sys.stdout, verbose=args.verbose))


async def _search(
    request: pb.SearchRequest, as_json: bool, out: TextIO, *, verbose: bool = False
) -> int:
    address = _address()
    async with operator_channel(address) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        try:
            reply = await stub.Search(request, metadata=_metadata(), timeout=60)
        except grpc.aio.AioRpcError as err:
            return report_rpc_error(err, as_json=as_json, service="retrieval", address=address)
    if as_json:
        out.write(json.dumps(answer_form(response_json(reply), verbose), indent=2) + "\n")
    else:
        out.write(render(reply) + "\n")
    return 0


# ---- JSON: the REST body ----


def response_json(reply: pb.SearchResponse) -> dict[str, Any]:
    body: dict[str, Any] = to_json(reply)
    for optional in ("graph", "explanation"):  # only when it was asked for
        if body.get(optional) is None:
            body.pop(optional, None)
    return body


# ---- human output ----


def _where(result: pb.SearchResult) -> str:
    source = result.repo or result.collection
    lines = f":{result.start_line}-{result.end_line}" if result.start_line else ""
    return f"{source} {result.path}{lines}"


def render(reply: pb.SearchResponse) -> str:
    streams = reply.streams
    status = ", ".join(
        f"{name} {enum_name(pb.StreamStatus.DESCRIPTOR, getattr(streams, name))}"
        for name in STREAMS
    )
    lines = [f"{len(reply.results)} results for {reply.query!r} ({status})"]
    if reply.HasField("explanation"):
        explanation = reply.explanation
        ran = ", ".join(run.name for run in explanation.stages if run.applied)
        lines.append(f"{explanation.query_class} question; stages that changed the order: {ran}")
    if reply.no_good_answer:
        # Said before the list: every result below is a weak likeness at best.
        lines.append("no good answer: no result is above low confidence")
    elif reply.confidence:
        level = enum_name(pb.Confidence.DESCRIPTOR, reply.confidence)
        lines.append(f"confidence {level} (the first result's)")
    for position, result in enumerate(reply.results, start=1):
        layer = enum_name(pb.Layer.DESCRIPTOR, result.layer)
        found = " ".join(
            f"{enum_name(pb.Stream.DESCRIPTOR, p.stream)}#{p.rank}" for p in result.provenance
        )
        rerank = f" rerank {result.rerank_score:.3f}" if result.HasField("rerank_score") else ""
        level = enum_name(pb.Confidence.DESCRIPTOR, result.confidence)
        lines.append(
            f"{position:>3}. [{layer}] {result.qualified_name or result.path} ({result.kind}) "
            f"score {result.score:.4f}{rerank} {level} [{found}]"
        )
        commit = f" @ {result.commit[:10]}" if result.commit else ""
        lines.append(f"     {_where(result)}{commit}")
        snippet = result.snippet.splitlines()[:_SNIPPET_LINES]
        lines.extend(f"     | {line}" for line in snippet)
        if result.truncated:
            lines.append("     | ...")
        if result.stages:
            path = " -> ".join(f"{e.stage} #{e.rank_after}" for e in result.stages)
            lines.append(f"     ranked: {path}")
    if reply.HasField("graph"):
        lines.append(f"graph: {len(reply.graph.nodes)} nodes, {len(reply.graph.edges)} edges")
        names = {node.id: node.qualified_name for node in reply.graph.nodes}
        names.update({r.id: r.qualified_name for r in reply.results})
        for edge in reply.graph.edges:
            source = getattr(edge, "from")
            kind = enum_name(pb.EdgeKind.DESCRIPTOR, edge.kind)
            lines.append(f"  {names.get(source, source)} -{kind}-> {names.get(edge.to, edge.to)}")
    return "\n".join(lines)

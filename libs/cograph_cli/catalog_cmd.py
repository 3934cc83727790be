"""`cograph repos list|show|delete|refs` and `cograph collections list|show|delete`: what is
indexed, as the operator sees it.

Like `cograph index`, these talk to retrieval directly (cograph_cli.identity: RETRIEVAL_ADDR,
else the running stack's port) as the operator, an admin. `--json` prints the REST bodies
(`GET /api/repositories`, `GET /api/repositories/{slug}`, `GET /api/collections`);
a failure prints `{"error", "detail"}` and exits 1 (2 for a malformed request).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.proto_json import to_json
from cograph_cli.cli_errors import print_error, report_rpc_error
from cograph_cli.identity import OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel

TIMEOUT_S = 60.0
Json = dict[str, Any]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repos = subparsers.add_parser("repos", help="list, show or delete indexed repositories")
    repo_actions = repos.add_subparsers(dest="action", required=True)
    listed = repo_actions.add_parser("list", help="every repository, with its freshness")
    listed.set_defaults(handler=_handler(_list_repositories))
    show = repo_actions.add_parser("show", help="one repository")
    show.add_argument("slug")
    show.set_defaults(handler=_handler(_show_repository))
    delete = repo_actions.add_parser("delete", help="remove a repository and its index")
    delete.add_argument("slug")
    delete.set_defaults(handler=_handler(_delete_repository))
    refs = repo_actions.add_parser(
        "refs", help="a repository's indexed branches and tags; add or remove one"
    )
    refs.add_argument("slug")
    change = refs.add_mutually_exclusive_group()
    change.add_argument("--add", metavar="REF", help="index this branch or tag of the source")
    change.add_argument("--remove", metavar="REF", help="remove this indexed ref and its index")
    refs.add_argument(
        "--remote", action="store_true", help="also list the source's branches and tags"
    )
    refs.set_defaults(handler=_handler(_refs))

    collections = subparsers.add_parser("collections", help="list, show or delete collections")
    actions = collections.add_subparsers(dest="action", required=True)
    listed = actions.add_parser("list", help="every collection")
    listed.set_defaults(handler=_handler(_list_collections))
    show = actions.add_parser("show", help="one collection")
    show.add_argument("name")
    show.set_defaults(handler=_handler(_show_collection))
    delete = actions.add_parser("delete", help="remove a collection and its index")
    delete.add_argument("name")
    delete.set_defaults(handler=_handler(_delete_collection))

    for parser in (*repo_actions.choices.values(), *actions.choices.values()):
        parser.add_argument("--json", action="store_true", help="print the REST body")


async def _list_repositories(stub: Any, _args: argparse.Namespace) -> Json:
    reply = await stub.ListRepositories(pb.ListRepositoriesRequest(), **_call_options())
    return {"repositories": [to_json(r) for r in reply.repositories]}


async def _show_repository(stub: Any, args: argparse.Namespace) -> Json:
    reply = await stub.GetRepository(pb.GetRepositoryRequest(slug=args.slug), **_call_options())
    return dict(to_json(reply.repository))


async def _delete_repository(stub: Any, args: argparse.Namespace) -> Json:
    request = pb.DeleteRepositoryRequest(slug=args.slug)
    await stub.DeleteRepository(request, **_call_options())
    return {"deleted": args.slug}


async def _refs(stub: Any, args: argparse.Namespace) -> Json:
    if args.add:
        reply = await stub.IndexRef(
            pb.IndexRefRequest(slug=args.slug, ref=args.add), **_call_options()
        )
        return {"job": to_json(reply.job)}
    if args.remove:
        request = pb.DeleteRefRequest(slug=args.slug, ref=args.remove)
        await stub.DeleteRef(request, **_call_options())
        return {"deleted": f"{args.slug} {args.remove}"}
    listed = await stub.ListRefs(
        pb.ListRefsRequest(slug=args.slug, remote=args.remote), **_call_options()
    )
    return dict(to_json(listed))


async def _list_collections(stub: Any, _args: argparse.Namespace) -> Json:
    reply = await stub.ListCollections(pb.ListCollectionsRequest(), **_call_options())
    return {"collections": [to_json(c) for c in reply.collections]}


async def _show_collection(stub: Any, args: argparse.Namespace) -> Json:
    # No GetCollection: the list is what the caller may read, and names are unique.
    listed = await _list_collections(stub, args)
    for collection in listed["collections"]:
        if collection["name"] == args.name:
            return dict(collection)
    raise _NotFound(f"no collection {args.name}")


async def _delete_collection(stub: Any, args: argparse.Namespace) -> Json:
    request = pb.DeleteCollectionRequest(name=args.name)
    await stub.DeleteCollection(request, **_call_options())
    return {"deleted": args.name}


class _NotFound(Exception):
    pass


def _call_options() -> dict[str, Any]:
    return {"metadata": OperatorIdentity.from_env().metadata(), "timeout": TIMEOUT_S}


def _handler(
    call: Callable[[Any, argparse.Namespace], Awaitable[Json]],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        address = service_address("retrieval")

        async def go() -> Json:
            async with operator_channel(address) as channel:
                return await call(retrieval_pb2_grpc.RetrievalServiceStub(channel), args)

        try:
            body = asyncio.run(go())
        except grpc.aio.AioRpcError as err:
            return report_rpc_error(err, as_json=args.json, service="retrieval", address=address)
        except _NotFound as err:
            print_error(args.json, "not_found", str(err))
            return 1
        if args.json:
            print(json.dumps(body, indent=2))
        else:
            print(_render(body))
        return 0

    return run


def _render(body: Json) -> str:
    if "deleted" in body:
        return f"deleted {body['deleted']}"
    if "repositories" in body:
        rows = body["repositories"]
        if not rows:
            return "(no repositories)"
        return "\n".join(_repository_line(r) for r in rows)
    if "default_branch" in body or "refs" in body:
        return _refs_text(body)
    if "job" in body:
        job = body["job"]
        return f"queued {job.get('target', '')}: job {job.get('id', '')} ({job.get('state', '')})"
    if "collections" in body:
        rows = body["collections"]
        if not rows:
            return "(no collections)"
        return "\n".join(_collection_line(c) for c in rows)
    return "\n".join(f"{key}: {_scalar(value)}" for key, value in body.items())


def _repository_line(repo: Json) -> str:
    commit = str(repo.get("commit") or "")[:12] or "-"
    freshness = repo.get("freshness", "")
    detail = f" ({repo['freshness_detail']})" if repo.get("freshness_detail") else ""
    return (
        f"{repo['slug']}  {repo.get('branch') or '-'}@{commit}  {repo.get('file_count', 0)} "
        f"files  {freshness}{detail}"
    )


def _refs_text(body: Json) -> str:
    lines = [f"{body.get('slug', '')}  default branch {body.get('default_branch') or '-'}"]
    for ref in body.get("refs") or []:
        commit = str(ref.get("commit") or "")[:12] or "-"
        lines.append(
            f"  {ref['name']}  {ref.get('kind', '')}@{commit}  {ref.get('file_count', 0)} files  "
            f"{ref.get('state') or '-'}"
        )
    if not body.get("refs"):
        lines.append("  (no other refs indexed)")
    remote = body.get("remote_refs") or []
    if remote or body.get("remote_detail"):
        lines.append("source:")
        lines.extend(
            f"  {r['name']}  {r.get('kind', '')}@{str(r.get('commit'))[:12]}" for r in remote
        )
        if body.get("remote_detail"):
            lines.append(f"  ({body['remote_detail']})")
    return "\n".join(lines)


def _collection_line(collection: Json) -> str:
    return (
        f"{collection['name']}  {collection.get('document_count', 0)} documents  "
        f"{collection.get('description', '')}"
    )


def _scalar(value: Any) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)

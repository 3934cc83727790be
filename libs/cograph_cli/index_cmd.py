"""`cograph index SOURCE` and `cograph collection add NAME DIR`: start an index job on the
retrieval service over gRPC, follow it with progress bars, and print a summary.

The CLI talks to retrieval directly (RETRIEVAL_ADDR,
else the port the stack in COGRAPH_DATA_DIR wrote, else 127.0.0.1:50052) as an
operator, so it sends admin principal metadata, signed with the internal secret
(cograph_cli.internal_secret); the gateway is the door for agents.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import grpc
from tqdm import tqdm

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.proto_json import to_json
from cograph_cli.cli_errors import print_error, report_rpc_error
from cograph_cli.identity import OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel

_POLL_S = 0.5
_MARKDOWN = (".md", ".markdown", ".mdx")


def _metadata() -> tuple[tuple[str, str], ...]:
    return OperatorIdentity.from_env().metadata()


def register(subparsers: argparse._SubParsersAction) -> None:
    """Adds `index` and `collection add`; each sets `handler(args) -> int`."""
    index = subparsers.add_parser(
        "index", help="index a repository (local path or git URL) into the code store"
    )
    index.add_argument("source", help="a local git repository or directory, or a git URL")
    index.add_argument("--slug", default="", help="host/owner/name (derived when omitted)")
    index.add_argument("--branch", default="", help="branch to index (default: current)")
    index.add_argument("--public", action="store_true", help="readable by every principal")
    index.add_argument("--no-progress", action="store_true", help="no progress bars")
    index.add_argument("--json", action="store_true", help="print the finished job as JSON")
    index.set_defaults(handler=run_index)

    collection = subparsers.add_parser("collection", help="markdown collections")
    actions = collection.add_subparsers(dest="collection_command", required=True)
    add = actions.add_parser("add", help="index a directory of markdown as a collection")
    add.add_argument("name", help="the collection's unique name")
    add.add_argument("dir", help="directory holding the markdown")
    add.add_argument("--description", default="", help="what the collection holds")
    add.add_argument("--public", action="store_true", help="readable by every principal")
    add.add_argument(
        "--upload",
        action="store_true",
        help="send the files' contents (when the service cannot read this directory)",
    )
    add.add_argument("--no-progress", action="store_true", help="no progress bars")
    add.add_argument("--json", action="store_true", help="print the finished job as JSON")
    add.set_defaults(handler=run_collection_add)


def _address() -> str:
    return service_address("retrieval")


def run_index(args: argparse.Namespace) -> int:
    source = args.source
    local = Path(source).expanduser()
    if local.exists():
        source = str(local.resolve())  # the service resolves paths from its own cwd
    request = pb.IndexRepositoryRequest(
        source=source, slug=args.slug, branch=args.branch, public=args.public
    )
    return asyncio.run(_start_and_follow(request, _progress(args), as_json=args.json))


def _progress(args: argparse.Namespace) -> bool:
    """Bars only on a terminal: in a file or a pipe they would be cursor escapes."""
    return not args.no_progress and not args.json and sys.stderr.isatty()


def run_collection_add(args: argparse.Namespace) -> int:
    directory = Path(args.dir).expanduser().resolve()
    if not directory.is_dir():
        print_error(args.json, "invalid_argument", f"{args.dir} is not a directory")
        return 2
    request = pb.IndexCollectionRequest(
        name=args.name, description=args.description, public=args.public
    )
    if args.upload:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and path.suffix.lower() in _MARKDOWN:
                request.documents.append(
                    pb.Document(
                        path=path.relative_to(directory).as_posix(),
                        content=path.read_text(errors="replace"),
                    )
                )
    else:
        request.directory = str(directory)
    return asyncio.run(_start_and_follow(request, _progress(args), as_json=args.json))


async def _start_and_follow(
    request: pb.IndexRepositoryRequest | pb.IndexCollectionRequest,
    progress: bool,
    *,
    as_json: bool = False,
) -> int:
    address = _address()
    async with operator_channel(address) as channel:
        stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        try:
            if isinstance(request, pb.IndexRepositoryRequest):
                started = (
                    await stub.IndexRepository(request, metadata=_metadata(), timeout=60)
                ).job
            else:
                started = (
                    await stub.IndexCollection(request, metadata=_metadata(), timeout=60)
                ).job
            job = await follow_job(stub, started.id, progress)
        except grpc.aio.AioRpcError as err:
            return report_rpc_error(err, as_json=as_json, service="retrieval", address=address)
        repository: pb.Repository | None = None
        if job.state == pb.JOB_STATE_SUCCEEDED and job.kind == pb.JOB_KIND_REPOSITORY:
            reply = await stub.GetRepository(
                pb.GetRepositoryRequest(slug=job.target), metadata=_metadata(), timeout=10
            )
            repository = reply.repository
    if as_json:
        body: dict[str, object] = {"job": to_json(job)}
        if repository is not None:
            body["repository"] = to_json(repository)
        print(json.dumps(body, indent=2))
    else:
        print(render_summary(job, repository))
    return 0 if job.state == pb.JOB_STATE_SUCCEEDED else 1


async def follow_job(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    job_id: str,
    show_progress: bool,
    out: TextIO | None = None,
) -> pb.Job:
    """Polls GetJob until the job ends, drawing files / nodes / embeddings bars."""
    stream = out or sys.stderr
    disable = not show_progress
    bars = {
        "files": tqdm(desc="files", unit="file", position=0, file=stream, disable=disable),
        "nodes": tqdm(desc="nodes", unit="node", position=1, file=stream, disable=disable),
        "embeddings": tqdm(
            desc="embeddings", unit="text", position=2, file=stream, disable=disable
        ),
    }
    try:
        while True:
            job = (
                await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=_metadata(), timeout=10)
            ).job
            p = job.progress
            _advance(bars["files"], p.files_done, p.files_total, p.phase)
            _advance(bars["nodes"], p.nodes, None, None)
            _advance(bars["embeddings"], p.embeddings_done, p.embeddings_total, None)
            if job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
                return job
            await asyncio.sleep(_POLL_S)
    finally:
        for bar in bars.values():
            bar.close()


def _advance(bar: tqdm, value: int, total: int | None, phase: str | None) -> None:
    if total is not None and bar.total != total:
        bar.total = total
    if phase:
        bar.set_postfix_str(phase, refresh=False)
    if value > bar.n:
        bar.update(value - bar.n)


def _counts(values: Mapping[str, int]) -> str:
    ordered = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{key} {count}" for key, count in ordered) or "none"


def render_summary(job: pb.Job, repository: pb.Repository | None = None) -> str:
    """The final report: what was indexed, per language, what was skipped and why, time."""
    p = job.progress
    kind = "repository" if job.kind == pb.JOB_KIND_REPOSITORY else "collection"
    if job.state != pb.JOB_STATE_SUCCEEDED:
        return f"Indexing {kind} {job.target} failed after {p.seconds:.1f} s: {job.error}"
    head = f"Indexed {kind} {job.target}"
    if repository is not None and repository.commit:
        head += f" @ {repository.branch} {repository.commit[:10]}"
    lines = [f"{head} in {p.seconds:.1f} s"]
    lines.append(
        f"  files: {p.files_seen} seen, {p.files_done} indexed, "
        f"{p.files_unchanged} unchanged, {p.files_removed} removed"
    )
    languages = []
    for language, files in sorted(p.files_by_language.items(), key=lambda kv: (-kv[1], kv[0])):
        nodes = p.nodes_by_language.get(language, 0)
        languages.append(f"{language} {files} files" + (f" / {nodes} nodes" if nodes else ""))
    lines.append(f"  languages: {', '.join(languages) or 'none'}")
    lines.append(f"  skipped: {_counts(p.skipped)}")
    lines.append(
        f"  written: {p.nodes} nodes, {p.edges} edges, {p.chunks} doc chunks; "
        f"{p.embeddings_done} embeddings"
    )
    if repository is not None:
        lines.append(
            f"  totals: {repository.file_count} files, {repository.node_count} nodes, "
            f"{repository.edge_count} edges, {repository.doc_chunk_count} doc chunks"
        )
    return "\n".join(lines)

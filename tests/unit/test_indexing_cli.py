"""The index CLI's argument parsing and final summary (the gRPC flow is an integration
test)."""

from __future__ import annotations

import argparse

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_cli import index_cmd


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cograph")
    index_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_arguments() -> None:
    args = _parser().parse_args(["index", ".", "--slug", "h/o/n", "--branch", "dev"])
    assert (args.source, args.slug, args.branch, args.handler) == (
        ".",
        "h/o/n",
        "dev",
        index_cmd.run_index,
    )
    args = _parser().parse_args(["collection", "add", "docs", "./d", "--description", "x"])
    assert (args.name, args.dir, args.description, args.upload) == ("docs", "./d", "x", False)
    assert args.handler is index_cmd.run_collection_add


def test_summary_of_a_successful_repository_job() -> None:
    job = pb.Job(
        id="j",
        kind=pb.JOB_KIND_REPOSITORY,
        target="h/o/n",
        state=pb.JOB_STATE_SUCCEEDED,
        progress=pb.JobProgress(
            files_seen=5,
            files_done=3,
            files_unchanged=2,
            nodes=40,
            edges=70,
            chunks=4,
            embeddings_done=84,
            skipped={"binary": 2, "lockfile": 1},
            files_by_language={"python": 3, "markdown": 2},
            nodes_by_language={"python": 40},
            seconds=1.25,
        ),
    )
    repo = pb.Repository(slug="h/o/n", branch="main", commit="0123456789abcdef", file_count=5)
    text = index_cmd.render_summary(job, repo)
    assert text.splitlines() == [
        "Indexed repository h/o/n @ main 0123456789 in 1.2 s",
        "  files: 5 seen, 3 indexed, 2 unchanged, 0 removed",
        "  languages: python 3 files / 40 nodes, markdown 2 files",
        "  skipped: binary 2, lockfile 1",
        "  written: 40 nodes, 70 edges, 4 doc chunks; 84 embeddings",
        "  totals: 5 files, 0 nodes, 0 edges, 0 doc chunks",
    ]


def test_summary_of_a_failed_job() -> None:
    job = pb.Job(
        kind=pb.JOB_KIND_COLLECTION,
        target="docs",
        state=pb.JOB_STATE_FAILED,
        error="boom",
        progress=pb.JobProgress(seconds=2),
    )
    assert index_cmd.render_summary(job) == "Indexing collection docs failed after 2.0 s: boom"

"""Why fused loses where it loses: per question, fused against dense, stage by stage.

    python -m bench.quality.why --corpus bare-files [--language go] [--class semantic]
                                [--quick] [--show 12] [--env NAME=VALUE ...] [--json PATH]

Indexes a tuning corpus (unseen.py; never the frozen split), computes the dense baseline's
rank for every question outside the service (unseen_run.baselines), and asks the service
each question once with `explain` (stage_effects.answer_path). It prints what
`stage_effects.attribute` finds over the questions fused ranks below dense (which stages
moved the answer down, how often the vector stream itself was below dense, what ranks
above the answer), then the questions fused loses most on, each with the answer's stream
ranks, its moves through the stages and the rows ranked above it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality import unseen
from bench.quality.metrics import reciprocal_rank
from bench.quality.stack import Stack, index_all, running_stack
from bench.quality.stage_effects import DEPTH, TOP, AnswerPath, answer_path, attribute
from bench.quality.unseen import UQuery
from bench.quality.unseen_run import baselines
from cograph.retrieval.v1 import retrieval_pb2
from cograph_api.proto_json import enum_name
from cograph_text.paths import is_test_path


@dataclass
class Loss:
    query: UQuery
    path: AnswerPath
    dense: int | None
    above: list[str]  # the rows ranked above the answer: "layer kind name (stream ranks)"


def _row(result: retrieval_pb2.SearchResult) -> str:
    layer = enum_name(retrieval_pb2.Layer.DESCRIPTOR, result.layer)
    streams = ",".join(
        f"{enum_name(retrieval_pb2.Stream.DESCRIPTOR, p.stream)}#{p.rank}"
        for p in result.provenance
    )
    return f"{layer} {result.kind} {result.qualified_name or result.path} ({streams})"


async def _above(stack: Stack, query: UQuery, rank: int | None) -> list[str]:
    reply = await stack.stub.Search(
        retrieval_pb2.SearchRequest(query=query.text, repo=query.repo, top_k=DEPTH, verbose=True)
    )
    limit = (rank or TOP + 1) - 1
    return [_row(r) for r in reply.results[: min(limit, TOP)]]


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    sizes = unseen.SIZES["quick" if args.quick else "full"]
    sets = unseen.build(args.corpus, workdir, sizes)
    queries = [
        q
        for s in sets
        for q in s.queries
        if q.klass == args.klass and (not args.language or q.language == args.language)
    ]
    repos = [r for s in sets for r in s.repos]
    by_repo = {r.slug: unseen.repo_candidates(r) for r in repos}
    env = dict(item.split("=", 1) for item in args.env)
    async with running_stack(workdir, env) as stack:
        await index_all(stack, repos)
        dense = {
            qid: ranks["dense"] for qid, ranks in (await baselines(stack, by_repo, queries)).items()
        }
        paths = []
        for query in queries:
            paths.append(
                await answer_path(
                    stack.stub,
                    query.id,
                    query.text,
                    repo=query.repo,
                    matches=query.matches,
                    is_test=is_test_path,
                )
            )
        table = attribute(paths, dense)
        by_loss = sorted(
            (p for p in paths if reciprocal_rank(p.rank) < reciprocal_rank(dense.get(p.id))),
            key=lambda p: reciprocal_rank(p.rank) - reciprocal_rank(dense.get(p.id)),
        )
        queries_by_id = {q.id: q for q in queries}
        losses = [
            Loss(
                queries_by_id[p.id],
                p,
                dense.get(p.id),
                await _above(stack, queries_by_id[p.id], p.rank),
            )
            for p in by_loss[: args.show]
        ]
    mrr = {
        "fused": sum(reciprocal_rank(p.rank) for p in paths) / max(1, len(paths)),
        "dense": sum(reciprocal_rank(dense.get(p.id)) for p in paths) / max(1, len(paths)),
    }
    return {"mrr10": mrr, "attribution": table, "losses": losses}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"MRR@10 fused {result['mrr10']['fused']:.3f}, dense {result['mrr10']['dense']:.3f}",
        json.dumps(result["attribution"], indent=2),
    ]
    for loss in result["losses"]:
        path = loss.path
        moves = " ".join(f"{m.stage}:{m.before}->{m.after}" for m in path.moves)
        lines += [
            "",
            f"{loss.query.id} [{loss.query.language}] {loss.query.text!r}",
            f"  answer {loss.query.answers[0].qualified_name}: fused {path.rank}, dense "
            f"{loss.dense}, streams {path.streams}",
            f"  stages {moves}",
            *(f"  above: {row}" for row in loss.above),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", choices=unseen.CORPORA, default=["bare-files"])
    parser.add_argument("--class", dest="klass", default="semantic", choices=unseen.UNSEEN_CLASSES)
    parser.add_argument("--language", help="only this language's questions")
    parser.add_argument("--quick", action="store_true", help="the quick sizes")
    parser.add_argument("--show", type=int, default=12, help="questions printed in full")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", type=Path, help="also write the attribution here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-why-"))
    try:
        result = asyncio.run(run(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(render(result))
    if args.json:
        args.json.write_text(
            json.dumps({"mrr10": result["mrr10"], "attribution": result["attribution"]}, indent=2)
        )


if __name__ == "__main__":
    main()

"""Runs the frozen split (frozen.py) through the service and the external baselines.

Per question, scoped to its answer's repository, top 10:
- service, through the `Search` RPC: `vector`, `lexical`, `symbol` (one stream each),
  `fused` (the defaults) and, when the service names its ranking stages
  (`retrieval.search.pipeline.STAGE_NAMES`) and the request has `skip_stages`,
  `fused-<stage>`: fused with that one stage skipped, for every stage;
- outside the service, in the same run (unseen_run.baselines): `dense` (the embedder's own
  model over each definition's raw source as indexed), `bm25` and `dense+bm25` (RRF).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality import frozen, frozen_report, report, unseen
from bench.quality.metrics import first_rank
from bench.quality.replay import load_index
from bench.quality.search_client import STREAM_PB, Row
from bench.quality.stack import Stack, index_all, running_stack
from bench.quality.unseen import UQuery
from bench.quality.unseen_run import (
    BASELINES,
    EMBED_CHARS,
    TOP_K,
    UOutcome,
    crowding,
    evaluate,
)
from cograph.retrieval.v1 import retrieval_pb2

STREAMS: tuple[str, ...] = ("vector", "lexical", "symbol")
ABLATION_PREFIX = "fused-"


def ablation_stages() -> tuple[tuple[str, ...], str]:
    """The ranking stages a request can skip, and ""; or () and why there are none."""
    try:
        pipeline = importlib.import_module("retrieval.search.pipeline")
    except ImportError:
        return (), "no ablations: the service has no retrieval.search.pipeline (STAGE_NAMES)"
    # Every stage a request may skip (fusion itself is not one), in the pipeline's order.
    skippable = getattr(pipeline, "SKIPPABLE", None)
    names = tuple(
        n for n in getattr(pipeline, "STAGE_NAMES", ()) if skippable is None or n in skippable
    )
    if not names:
        return (), "no ablations: retrieval.search.pipeline names no STAGE_NAMES"
    if "skip_stages" not in retrieval_pb2.SearchRequest.DESCRIPTOR.fields_by_name:
        return (), "no ablations: SearchRequest has no skip_stages field"
    return names, ""


def configs(stages: Sequence[str]) -> tuple[str, ...]:
    return ("fused", *STREAMS, *(ABLATION_PREFIX + s for s in stages), *BASELINES)


async def search_rows(
    stack: Stack,
    text: str,
    repo: str,
    *,
    streams: Sequence[str] = (),
    skip_stages: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> tuple[Row, ...]:
    request = retrieval_pb2.SearchRequest(
        query=text, repo=repo, top_k=TOP_K, streams=[STREAM_PB[s] for s in streams]
    )
    if skip_stages:
        request.skip_stages.extend(skip_stages)
    response = await stack.stub.Search(request, timeout=timeout_s)
    return tuple(
        Row(r.repo, r.path, r.qualified_name, r.start_line, r.end_line, len(r.snippet))
        for r in response.results
    )


async def evaluate_query(stack: Stack, query: UQuery, stages: Sequence[str]) -> UOutcome:
    out = UOutcome(query)

    def rank(rows: Sequence[Row]) -> int | None:
        return first_rank(
            rows,
            lambda r: query.matches(r.repo, r.path, r.qualified_name, r.start_line, r.end_line),
        )

    fused = await search_rows(stack, query.text, query.repo)
    out.ranks["fused"] = rank(fused)
    out.nested_pairs, out.container_above, out.test_rows = crowding(query, fused)
    out.fused_rows = len(fused)
    for stream in STREAMS:
        out.ranks[stream] = rank(
            await search_rows(stack, query.text, query.repo, streams=(stream,))
        )
    for stage in stages:
        rows = await search_rows(stack, query.text, query.repo, skip_stages=(stage,))
        out.ranks[ABLATION_PREFIX + stage] = rank(rows)
    return out


async def run(args: argparse.Namespace, workdir: Path) -> tuple[list[UOutcome], dict[str, Any]]:
    started = time.perf_counter()
    loaded = frozen.load(workdir, quick=args.quick)
    stages, why = ablation_stages()
    print(
        f"frozen split {loaded.notes['split']}: {len(loaded.queries)} questions over "
        f"{len(loaded.repos)} repositories; ablations: {', '.join(stages) or why}"
    )
    by_repo = {r.slug: unseen.repo_candidates(r) for r in loaded.repos}
    env = dict(item.split("=", 1) for item in args.env)
    if args.embed_text:
        env["RETRIEVAL_CODE_EMBED_TEXT"] = args.embed_text
    async with running_stack(workdir, env) as stack:
        t0 = time.perf_counter()
        seconds = await index_all(stack, loaded.repos)
        index_s = time.perf_counter() - t0
        print(f"indexed in {index_s:.0f} s")
        rows = await load_index(stack.pool)
        present = {(r.repo, r.path, r.qualified_name) for r in rows.values()}
        kept = [q for q in loaded.queries if all(a.key() in present for a in q.answers)]
        dropped = [q.id for q in loaded.queries if q not in set(kept)]
        t0 = time.perf_counter()
        outcomes = await evaluate(
            stack,
            kept,
            by_repo,
            concurrency=args.concurrency,
            one_query=functools.partial(evaluate_query, stages=stages),
            noun="questions",
        )
        query_s = time.perf_counter() - t0
        embed_text = stack.settings.index.code_embed_text
    extra = {
        "run": {
            "split": loaded.notes["split"],
            "quick": args.quick,
            "stages": list(stages),
            "no_ablations": why,
            "index_seconds": index_s,
            "index_seconds_by_repo": seconds,
            "query_seconds": query_s,
            "total_seconds": time.perf_counter() - started,
            "indexed_rows": len(rows),
            "candidates_by_repo": {slug: len(c) for slug, c in by_repo.items()},
            "answers_not_indexed": dropped,
            "answers_not_parsed": loaded.notes["answers_not_parsed"],
            "code_embed_text": embed_text,
            "settings": env,
        },
        "repositories": loaded.split["repositories"],
    }
    return outcomes, extra


def main(args: argparse.Namespace) -> None:
    if args.rerender:  # the tables of a finished run, from its queries.json and results.json
        records = json.loads((args.rerender / "queries.json").read_text())["queries"]
        outcomes = frozen_report.outcomes_from_json(records)
        old = json.loads((args.rerender / "results.json").read_text())
        extra = {"run": old["run"], "repositories": old["repositories"]}
    else:
        workdir = Path(tempfile.mkdtemp(prefix="bench-frozen-"))
        try:
            outcomes, extra = asyncio.run(run(args, workdir))
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
    run_ = extra["run"]
    all_configs = configs(run_["stages"])
    notes = [
        f"split {run_['split']}{' (--quick sample)' if run_['quick'] else ''}: indexed "
        f"{run_['indexed_rows']} rows in {run_['index_seconds']:.0f} s; {len(outcomes)} "
        f"questions in {run_['query_seconds']:.0f} s; {run_['total_seconds']:.0f} s in all",
        f"{len(run_['answers_not_indexed'])} questions dropped: an answer not indexed",
        "every question is scoped to its answer's repository; the baselines rank every "
        "definition of that repository (modules left out), computed in this run",
        f"dense: the embedder process's model (onnx-int8 all-MiniLM-L6-v2, what the service "
        f"embeds with) over each definition's raw source as indexed (first "
        f"{EMBED_CHARS} characters), exact cosine; bm25: Okapi (k1 1.2, b 0.75) over "
        "identifier-split tokens of the same source; dense+bm25: RRF, k 60, of their top 300",
        "R@1 and R@10 count the first row matching an answer; fused vs dense compares each "
        "question's two ranks within the top 10 (absent or below 10 counts as 11)",
        "ablations: " + (", ".join(run_["stages"]) if run_["stages"] else run_["no_ablations"]),
        f"code embed text {run_['code_embed_text']}; settings "
        + (", ".join(f"{k}={v}" for k, v in sorted(run_["settings"].items())) or "the defaults"),
        "the frozen split is a test set: no tuning tool reads it (bench/quality/frozen/README.md)",
    ]
    text = frozen_report.render(outcomes, all_configs, notes)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(text)
    report.write_json(
        args.out / "results.json",
        frozen_report.payload(outcomes, all_configs, {**extra, "notes": notes}),
    )
    report.write_json(args.out / "queries.json", {"queries": frozen_report.per_question(outcomes)})
    print(f"wrote {args.out}/report.md, results.json, queries.json")

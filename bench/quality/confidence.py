"""Calibrates and checks search confidence (services/retrieval/search/confidence.py).

    python -m bench.quality.confidence [--out DIR (bench/out/confidence)] [--concurrency N]
                                       [--keep]
    python -m bench.quality.confidence --rescore DIR [--out DIR]

Builds the package sets of the CI plan (datasets.SMALL: one Python and one JavaScript
package, ten markdown sets; symbol, signature, semantic and docs questions, each with its
tuning and held-out half) and nonsense queries (random letters, invented words, questions
about things no code base holds; fixed seed, halves by parity), indexes the packages into
a fresh embedded stack (stack.py) and runs every query once through the `Search` RPC with
the defaults (fused, top_k 10, every repository). Per query it records whether the first
result is the question's answer, each result's confidence and the evidence it was graded
on (its streams' ranks and raw scores; exact when the pin stage placed it), and the
answer's `confidence` and `no_good_answer`. The frozen split is never read: its questions
are a test set (frozen.py).

It prints, per set and half: how many queries each level took and how often the first
result is right at each level; for nonsense, the share marked low and the share with
`no_good_answer`. `--rescore DIR` grades a recorded run again with the thresholds as they
are now (confidence.grade over the recorded evidence; nothing is searched), which is how
the thresholds were tuned on the tuning half before the held-out half was looked at.
The run takes about 80 s on two cores (bench/RESULTS.md, "Search confidence").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality import datasets, frozen, report
from bench.quality.datasets import Query
from bench.quality.metrics import first_rank
from bench.quality.replay import load_index
from bench.quality.runner import matcher, missing_answers
from bench.quality.search_client import Row
from bench.quality.stack import Stack, index_all, running_stack
from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.proto_json import enum_name
from retrieval.search.confidence import CONFIDENCES, Evidence, grade, verdict
from retrieval.search.fusion import PIN_SCORE, StreamName

TOP_K = 10
NONSENSE_SEED = 31
NONSENSE_PER_KIND = 40
ANSWERABLE = ("symbol", "signature", "semantic", "docs")
NONSENSE = ("letters", "invented", "off-topic")
_STREAMS: dict[int, StreamName] = {
    pb.STREAM_VECTOR: "vector",
    pb.STREAM_LEXICAL: "lexical",
    pb.STREAM_SYMBOL: "symbol",
}
# The issue's own example comes first among the random letters.
_ISSUE_EXAMPLE = "zzqqxx nothing here"
_SYLLABLES = (
    *("bor", "va", "ne", "tes", "qui", "mar", "fo", "lo", "gri", "zen", "dup", "ka", "ro"),
    *("shi", "vel", "mun", "tra", "ple", "dax", "wo", "sny", "bre", "quo", "lim", "fus"),
)
_TOPICS = (
    "sourdough bread",
    "a violin bow",
    "tulip bulbs",
    "a sailboat mast",
    "wedding flowers",
    "a knitted scarf",
    "marmalade",
    "a mountain bike chain",
    "tomato seedlings",
    "a wool carpet",
    "an espresso machine",
    "horse riding boots",
    "a birthday cake",
    "watercolour paper",
    "ski wax",
    "a fishing rod",
)
_ASKS = (
    "how do I clean {t} after winter",
    "what is the best season to buy {t}",
    "where can I repair {t} near the harbour",
    "why does {t} smell of vinegar",
    "recommend a recipe or tips for {t}",
)


def nonsense_queries(
    per_kind: int = NONSENSE_PER_KIND, seed: int = NONSENSE_SEED
) -> list[tuple[str, str, str, int]]:
    """(id, kind, text, half) for every nonsense query: the same list on every run."""
    rng = random.Random(seed)
    out: list[tuple[str, str, str, int]] = []
    letters = "abcdefghijklmnopqrstuvwxyz"
    for i in range(per_kind):
        if i == 0:
            text = _ISSUE_EXAMPLE
        else:
            words = rng.randint(1, 3)
            text = " ".join(
                "".join(rng.choice(letters) for _ in range(rng.randint(4, 10)))
                for _ in range(words)
            )
        out.append((f"letters-{i}", "letters", text, i % 2))
    for i in range(per_kind):
        words = rng.randint(2, 4)
        text = " ".join(
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(words)
        )
        out.append((f"invented-{i}", "invented", text, i % 2))
    pairs = [(ask, topic) for ask in _ASKS for topic in _TOPICS]
    for i, (ask, topic) in enumerate(rng.sample(pairs, min(per_kind, len(pairs)))):
        out.append((f"off-topic-{i}", "off-topic", ask.format(t=topic), i % 2))
    return out


@dataclass(frozen=True)
class Probe:
    """One query to run: a question with its answer, or nonsense (answer None)."""

    id: str
    kind: str  # a question class, or a nonsense kind
    text: str
    half: int
    query: Query | None = None


def _evidence(result: pb.SearchResult) -> dict[str, Any]:
    return {
        "confidence": enum_name(pb.Confidence.DESCRIPTOR, result.confidence),
        # The pin stage adds PIN_SCORE per level to exactly the results the symbol stream
        # found named by the query: the service's `exact`, as the answer shows it.
        "exact": result.score >= PIN_SCORE,
        "streams": [[_STREAMS[p.stream], p.rank, p.score] for p in result.provenance],
    }


async def _run_one(stack: Stack, probe: Probe) -> dict[str, Any]:
    request = pb.SearchRequest(query=probe.text, top_k=TOP_K)
    reply = await stack.stub.Search(request, timeout=120)
    record: dict[str, Any] = {
        "id": probe.id,
        "kind": probe.kind,
        "half": probe.half,
        "confidence": enum_name(pb.Confidence.DESCRIPTOR, reply.confidence),
        "no_good_answer": reply.no_good_answer,
        "results": [_evidence(r) for r in reply.results],
        "vector": enum_name(pb.StreamStatus.DESCRIPTOR, reply.streams.vector),
    }
    if probe.query is None:
        record["text"] = probe.text  # ours; the questions' texts come from the packages
    else:
        rows = [
            Row(r.repo, r.path, r.qualified_name, r.start_line, r.end_line) for r in reply.results
        ]
        record["answer_rank"] = first_rank(rows, matcher(probe.query.answer))
    return record


async def collect(workdir: Path, concurrency: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    started = time.perf_counter()
    data = datasets.build(datasets.SMALL, workdir)
    async with running_stack(workdir) as stack:
        t0 = time.perf_counter()
        await index_all(stack, data.repositories)
        index_s = time.perf_counter() - t0
        missing = set(missing_answers(data.queries, await load_index(stack.pool)))
        probes = [Probe(q.id, q.klass, q.text, q.half, q) for q in data.queries if q not in missing]
        probes += [Probe(*item) for item in nonsense_queries()]
        print(f"indexed in {index_s:.0f} s; {len(probes)} queries")
        gate = asyncio.Semaphore(concurrency)

        async def one(probe: Probe) -> dict[str, Any]:
            async with gate:
                return await _run_one(stack, probe)

        t0 = time.perf_counter()
        records = list(await asyncio.gather(*(one(p) for p in probes)))
        query_s = time.perf_counter() - t0
    run = {
        "plan": data.plan.name,
        "manifest_digest": data.digest(),
        "index_seconds": round(index_s, 1),
        "query_seconds": round(query_s, 1),
        "total_seconds": round(time.perf_counter() - started, 1),
        "answers_not_indexed": len(missing),
    }
    return records, run


def regrade(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records graded again from their evidence with the current thresholds."""
    out = []
    for record in records:
        grades = []
        results = []
        for result in record["results"]:
            evidence = Evidence(
                exact=bool(result["exact"]),
                ranks={s: int(rank) for s, rank, _ in result["streams"]},
                scores={s: float(score) for s, _, score in result["streams"]},
            )
            level = grade(evidence)
            grades.append(level)
            results.append({**result, "confidence": level})
        judged = verdict(grades)
        out.append(
            {
                **record,
                "results": results,
                "confidence": judged.confidence or "unspecified",
                "no_good_answer": judged.no_good_answer,
            }
        )
    return out


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"


def _rows(records: Sequence[dict[str, Any]], name: str, half: str) -> str:
    levels = Counter(r["confidence"] for r in records)
    right = Counter(r["confidence"] for r in records if r.get("answer_rank") == 1)
    cells = [name, half, str(len(records))]
    cells += [str(levels[level]) for level in reversed(CONFIDENCES)]
    cells += [_share(right[level], levels[level]) for level in reversed(CONFIDENCES)]
    cells.append(_share(sum(r["no_good_answer"] for r in records), len(records)))
    return "| " + " | ".join(cells) + " |"


def render(records: Sequence[dict[str, Any]], run: dict[str, Any]) -> str:
    """The tables: every set by half, then the headline figures."""
    lines = [
        "# Search confidence",
        "",
        f"plan {run.get('plan')}; indexed in {run.get('index_seconds')} s, "
        f"{len(records)} queries in {run.get('query_seconds')} s",
        "",
        "First result right (answerable sets) at each level of the answer's confidence:",
        "",
        "| set | half | n | high | medium | low | right: high | medium | low | no_good_answer |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    halves = (("tuning", 0), ("held-out", 1))
    groups = [(k, [k]) for k in (*ANSWERABLE, *NONSENSE)]
    groups += [("all answerable", list(ANSWERABLE)), ("all nonsense", list(NONSENSE))]
    for name, kinds in groups:
        for half_name, half in halves:
            chosen = [r for r in records if r["kind"] in kinds and r["half"] == half]
            if chosen:
                lines.append(_rows(chosen, name, half_name))
    answerable = [r for r in records if r["kind"] in ANSWERABLE]
    nonsense = [r for r in records if r["kind"] in NONSENSE]
    lines += ["", *headline(answerable, nonsense)]
    return "\n".join(lines) + "\n"


def headline(answerable: Sequence[dict[str, Any]], nonsense: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for half_name, half in (("tuning", 0), ("held-out", 1)):
        high = [r for r in answerable if r["half"] == half and r["confidence"] == "high"]
        right = sum(r.get("answer_rank") == 1 for r in high)
        asked = sum(r["half"] == half for r in answerable)
        # Exact names are high and right by construction; the rest is what the cosine and
        # agreement thresholds decide.
        unnamed = [r for r in high if not r["results"][0]["exact"]]
        unnamed_right = sum(r.get("answer_rank") == 1 for r in unnamed)
        out.append(
            f"- {half_name} half: precision of high {_share(right, len(high))} "
            f"({right} of {len(high)}; high on {_share(len(high), asked)} of the questions); "
            f"without exact names {_share(unnamed_right, len(unnamed))} "
            f"({unnamed_right} of {len(unnamed)})"
        )
    low = sum(r["confidence"] == "low" for r in nonsense)
    none = sum(r["no_good_answer"] for r in nonsense)
    out.append(
        f"- nonsense: {_share(low, len(nonsense))} marked low ({low} of {len(nonsense)}), "
        f"{_share(none, len(nonsense))} with no_good_answer"
    )
    example = [r for r in nonsense if r.get("text") == _ISSUE_EXAMPLE]
    if example:
        first = example[0]
        out.append(
            f"- `{_ISSUE_EXAMPLE}`: {first['confidence']}, "
            f"no_good_answer {str(first['no_good_answer']).lower()}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out/confidence"))
    parser.add_argument("--concurrency", type=int, default=4, help="queries in flight")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--rescore", type=Path, metavar="DIR", help="grade a recorded run again; no search"
    )
    args = parser.parse_args()
    if args.rescore:
        frozen.refuse_frozen_run(args.rescore, "bench.quality.confidence")
        data = json.loads((args.rescore / "results.json").read_text())
        records, run = regrade(data["queries"]), data["run"]
    else:
        workdir = Path(tempfile.mkdtemp(prefix="bench-confidence-"))
        try:
            records, run = asyncio.run(collect(workdir, args.concurrency))
        finally:
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
    text = render(records, run)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(text)
    report.write_json(args.out / "results.json", {"run": run, "queries": records})
    print(f"wrote {args.out}/report.md, results.json")


if __name__ == "__main__":
    main()

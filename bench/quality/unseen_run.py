"""Runs the unseen corpora (unseen.py) through the service and the external baselines.

Per query, scoped to the answer's repository, top 10:
- service: `vector`, `lexical`, `symbol` (one stream each, the request's `streams` field)
  and `fused` (the defaults), through the `Search` RPC;
- outside the service (baselines.py), over every definition of the same repository:
  `dense` (the embedder's own model, the onnx-int8 all-MiniLM-L6-v2 the service embeds
  with, called over gRPC on each definition's raw source as indexed, at most
  EMBED_CHARS characters; exact cosine), `bm25` (identifier-split tokens of the same
  source) and `dense+bm25` (plain RRF, k 60).
A query's rank is the first row that matches any of its answers. For the fused top 10 it
also records what crowds the answer: rows that contain another row of the same top 10
(a module or class and its member), a container of the answer ranked above it, and test
code (cograph_text.paths, the class the service weighs down).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from bench.quality.baselines import BM25, dense_rank, rrf, tokens
from bench.quality.metrics import first_rank
from bench.quality.search_client import Row, search
from bench.quality.stack import Stack
from bench.quality.unseen import Candidate, UQuery
from cograph_text.paths import is_test_path

SERVICE: tuple[str, ...] = ("vector", "lexical", "symbol", "fused")
# dense+doc: the same model over each definition with its doc comment where that lies
# outside the definition's lines (Java, JavaScript, Go, Rust), as a Python definition carries
# its docstring: the siblings' documentation a search service also reads.
BASELINES: tuple[str, ...] = ("dense", "bm25", "dense+bm25", "dense+doc")
CONFIGS: tuple[str, ...] = (*SERVICE, *BASELINES)
TOP_K = 10
DEPTH = 300  # how deep the baselines' lists are kept (and fused by RRF)
EMBED_CHARS = 4000  # the model reads 256 tokens; more text only costs tokenizer time
EMBED_BATCH = 64


@dataclass
class UOutcome:
    query: UQuery
    ranks: dict[str, int | None] = field(default_factory=dict)
    nested_pairs: int = 0  # pairs in the fused top 10 where one row contains the other
    container_above: bool = False  # a container of an answer ranked above it (or no answer)
    test_rows: int = 0  # test-code rows in the fused top 10
    fused_rows: int = 0


def contains(outer: Row, inner: Row) -> bool:
    """`outer` spans `inner` in the same file and is not the same node."""
    return (
        outer.repo == inner.repo
        and outer.path == inner.path
        and outer.start_line <= inner.start_line
        and inner.end_line <= outer.end_line
        and (outer.qualified_name, outer.start_line, outer.end_line)
        != (inner.qualified_name, inner.start_line, inner.end_line)
    )


def nested_pairs(rows: Sequence[Row]) -> int:
    return sum(1 for a in rows for b in rows if a is not b and contains(a, b))


def crowding(query: UQuery, rows: Sequence[Row]) -> tuple[int, bool, int]:
    """(nested pairs, a container of an answer above the first answer, test rows)."""
    rank = first_rank(rows, lambda r: query.matches(*_key(r)))
    above = rows[: (rank - 1) if rank else len(rows)]
    answers = [
        Row(a.repo, a.path, a.qualified_name, a.start_line, a.end_line) for a in query.answers
    ]
    container = any(contains(r, a) for r in above for a in answers if a.start_line)
    tests = sum(1 for r in rows if is_test_path(r.path))
    return nested_pairs(rows), container, tests


def _key(row: Row) -> tuple[str, str, str, int, int]:
    return (row.repo, row.path, row.qualified_name, row.start_line, row.end_line)


@dataclass
class RepoBaseline:
    """One repository's candidates with their vectors and BM25 index."""

    candidates: list[Candidate]
    matrix: npt.NDArray[np.float32]
    bm25: BM25
    documented: npt.NDArray[np.float32]  # rows of documented_text

    def ranks(self, query: UQuery, vector: npt.NDArray[np.float32]) -> dict[str, int | None]:
        dense = dense_rank(vector, self.matrix, DEPTH)
        with_doc = dense_rank(vector, self.documented, DEPTH)
        lexical = self.bm25.rank(tokens(query.text), DEPTH)
        hybrid = rrf([dense, lexical], limit=DEPTH)

        def rank_of(ranking: list[int]) -> int | None:
            return first_rank(
                ranking,
                lambda i: query.matches(
                    self.candidates[i].repo,
                    self.candidates[i].path,
                    self.candidates[i].qualified_name,
                    self.candidates[i].start_line,
                    self.candidates[i].end_line,
                ),
            )

        return {
            "dense": rank_of(dense),
            "bm25": rank_of(lexical),
            "dense+bm25": rank_of(hybrid),
            "dense+doc": rank_of(with_doc),
        }


async def embed_all(stack: Stack, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    parts = []
    for start in range(0, len(texts), EMBED_BATCH):
        batch = [t[:EMBED_CHARS] or " " for t in texts[start : start + EMBED_BATCH]]
        parts.append(np.asarray(await stack.embedder.embed(batch, timeout=600), dtype=np.float32))
    return np.vstack(parts)


async def baselines(
    stack: Stack, by_repo: dict[str, list[Candidate]], queries: Sequence[UQuery]
) -> dict[str, dict[str, int | None]]:
    """The external baselines' ranks per query id."""
    out: dict[str, dict[str, int | None]] = {}
    vectors = await embed_all(stack, [q.text for q in queries])
    for slug, cands in by_repo.items():
        matrix = await embed_all(stack, [c.text for c in cands])
        documented = matrix.copy()
        with_doc = [i for i, c in enumerate(cands) if c.doc]
        if with_doc:
            documented[with_doc] = await embed_all(
                stack, [cands[i].documented_text for i in with_doc]
            )
        base = RepoBaseline(cands, matrix, BM25(tokens(c.text) for c in cands), documented)
        for index, query in enumerate(queries):
            if query.repo == slug:
                out[query.id] = base.ranks(query, vectors[index])
    return out


async def evaluate_query(stack: Stack, query: UQuery) -> UOutcome:
    out = UOutcome(query)

    def is_answer(row: Row) -> bool:
        return query.matches(*_key(row))

    for name in ("vector", "lexical", "symbol"):
        reply = await search(stack.stub, query.text, streams=(name,), repo=query.repo, top_k=TOP_K)
        out.ranks[name] = first_rank(reply.rows, is_answer)
    fused = await search(stack.stub, query.text, repo=query.repo, top_k=TOP_K)
    out.ranks["fused"] = first_rank(fused.rows, is_answer)
    out.nested_pairs, out.container_above, out.test_rows = crowding(query, fused.rows)
    out.fused_rows = len(fused.rows)
    return out


async def evaluate(
    stack: Stack,
    queries: Sequence[UQuery],
    by_repo: dict[str, list[Candidate]],
    *,
    concurrency: int = 4,
    progress: Callable[[str], None] = print,
    one_query: Callable[[Stack, UQuery], Awaitable[UOutcome]] = evaluate_query,
    noun: str = "queries",
) -> list[UOutcome]:
    """Every query through `one_query` (the service's configurations), `concurrency` at a
    time, with the external baselines' ranks added."""
    started = time.perf_counter()
    external = await baselines(stack, by_repo, queries)
    progress(
        f"  baselines over {sum(map(len, by_repo.values()))} candidates in "
        f"{time.perf_counter() - started:.0f} s"
    )
    gate = asyncio.Semaphore(concurrency)
    done = 0
    started = time.perf_counter()

    async def one(query: UQuery) -> UOutcome:
        nonlocal done
        async with gate:
            outcome = await one_query(stack, query)
        outcome.ranks.update(external.get(query.id, dict.fromkeys(BASELINES)))
        done += 1
        if done % 100 == 0 or done == len(queries):
            rate = done / (time.perf_counter() - started)
            progress(f"  {done}/{len(queries)} {noun} ({rate:.1f}/s)")
        return outcome

    return list(await asyncio.gather(*(one(q) for q in queries)))

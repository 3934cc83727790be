"""The external baselines of the unseen harness (unseen_run.py), over the package sets.

Package queries are not scoped to a repository (`fused` searches every one), so neither
are the baselines:
- a code query (symbol, signature, semantic) ranks every definition of every indexed code
  repository: the copies as written for indexing, parsed with the indexer's CodeParser
  (unseen.repo_candidates), each definition by its lines as the copy has them (a semantic
  target's docstring is cut there, datasets.build_code); `dense+doc` reads the doc comment
  that lies outside a definition (JavaScript) before its lines;
- a docs query ranks every markdown chunk of the markdown repository (chunk_markdown, the
  indexer's chunking; a long section is several chunks, and a chunk overlapping the
  answer's lines counts, as for the service's rows), each by its own lines; no doc comments
  there, so `dense+doc` equals `dense`.
`dense` is the embedder's own model (what the service embeds with) with exact cosine,
`bm25` identifier-split tokens of the same text, `dense+bm25` plain RRF of the two
(baselines.py, unseen_run.RepoBaseline).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from bench.quality.baselines import BM25, tokens
from bench.quality.datasets import Query, RepoCopy
from bench.quality.stack import Stack
from bench.quality.unseen import Candidate, UnseenClass, UQuery, repo_candidates
from bench.quality.unseen_run import BASELINES, RepoBaseline, embed_all
from retrieval.indexing.markdown import chunk_markdown, is_markdown

CORPUS = "packages"
SECTION = "section"  # the kind of a markdown chunk's candidate


def code_candidates(repos: Sequence[RepoCopy]) -> list[Candidate]:
    """Every definition of every code repository (markdown repositories left out)."""
    return [c for repo in repos if repo.language != "markdown" for c in repo_candidates(repo)]


def section_candidates(repos: Sequence[RepoCopy]) -> list[Candidate]:
    """Every markdown chunk of the markdown repositories, as the indexer chunks them."""
    out: list[Candidate] = []
    for repo in repos:
        if repo.language != "markdown":
            continue
        for path in sorted(repo.directory.rglob("*")):
            rel = path.relative_to(repo.directory).as_posix()
            if not path.is_file() or not is_markdown(rel):
                continue
            for chunk in chunk_markdown(rel, path.read_text(encoding="utf-8")):
                out.append(
                    Candidate(
                        repo.slug, rel, "", SECTION, chunk.start_line, chunk.end_line, chunk.body
                    )
                )
    return out


def as_uquery(query: Query) -> UQuery:
    """A package query in the unseen harness's form, which RepoBaseline ranks: it reads
    only the text and the answer (a docs answer matches by overlapping lines)."""
    return UQuery(
        query.id,
        CORPUS,
        cast(UnseenClass, query.klass),  # the class is carried, never read there
        query.language,
        query.text,
        (query.answer,),
        query.half,
    )


def is_docs(query: Query) -> bool:
    """A docs query's answer is a markdown section (no qualified name)."""
    return not query.answer.qualified_name


@dataclass
class Pool:
    """One candidate pool's baseline and how it was built."""

    base: RepoBaseline
    seconds: float


async def build_pool(stack: Stack, cands: list[Candidate]) -> Pool:
    """Vectors of every candidate (and of its documented text where it has a doc
    comment), and the BM25 index of the same texts."""
    started = time.perf_counter()
    matrix = await embed_all(stack, [c.text for c in cands])
    documented = matrix.copy()
    with_doc = [i for i, c in enumerate(cands) if c.doc]
    if with_doc:
        documented[with_doc] = await embed_all(stack, [cands[i].documented_text for i in with_doc])
    base = RepoBaseline(cands, matrix, BM25(tokens(c.text) for c in cands), documented)
    return Pool(base, time.perf_counter() - started)


async def ranks(
    stack: Stack,
    queries: Sequence[Query],
    repos: Sequence[RepoCopy],
    *,
    progress: Callable[[str], None] = print,
) -> tuple[dict[str, dict[str, int | None]], dict[str, Any]]:
    """The baselines' ranks per query id, and what the run took (candidates, seconds).
    A pool no query needs is neither read nor embedded."""
    out: dict[str, dict[str, int | None]] = {}
    info: dict[str, Any] = {}
    started = time.perf_counter()
    vectors = await embed_all(stack, [q.text for q in queries])
    for name, members, collect in (
        ("code", [i for i, q in enumerate(queries) if not is_docs(q)], code_candidates),
        ("docs", [i for i, q in enumerate(queries) if is_docs(q)], section_candidates),
    ):
        if not members:
            continue
        pool = await build_pool(stack, collect(repos))
        for i in members:
            out[queries[i].id] = pool.base.ranks(as_uquery(queries[i]), vectors[i])
        info[f"{name}_candidates"] = len(pool.base.candidates)
        info[f"{name}_with_doc_comment"] = sum(1 for c in pool.base.candidates if c.doc)
        info[f"{name}_embed_seconds"] = pool.seconds
        progress(
            f"  baselines: {len(members)} {name} queries over {len(pool.base.candidates)} "
            f"candidates (embedded in {pool.seconds:.0f} s)"
        )
    info["seconds"] = time.perf_counter() - started
    info["configs"] = list(BASELINES)
    return out, info

"""Search latency: p50/p95 of Search over gRPC on an index of 100k+ code nodes, with the
streams run one after another and concurrently (the default), in the
same run, and the query-embedding time shown on its own.

What the index holds (built in a minute or two, not by the indexer):
  * code nodes: every function, method and class that Python's `ast` finds in the packages
    installed in this environment (site-packages), walked in sorted order until --nodes;
    real qualified names, signatures, docstrings and bodies (cut at 2000 chars), grouped
    into one repository per top-level package. tsv / summary_tsv are built exactly as the
    indexer builds them (retrieval.search.lexemes.lexical_text, same weights); the summary is the
    indexer's extractive summary.
  * embeddings: real all-MiniLM-L6-v2 vectors (the running embedder) for --real nodes (a
    seeded sample across the corpus; `--real-sample first` takes the first ones in sorted
    order, which at 20k nodes are mostly one repository the principal cannot read) and
    their summaries (the ones prose queries are drawn from) and for the first 500 doc
    chunks; every other row gets a random unit vector (`--filler random`, the default), or
    a noisy copy of a real one (`--filler near`). Random filler is the worst case for HNSW:
    every filler row is about equally far from a query, so the graph search wanders
    through them (at 20k nodes the index scan took about twice as long as with near
    filler: bench/notes/search-latency.md, "Reading the results").
  * repo_docs: markdown and package METADATA from the same site-packages, chunked by
    heading/paragraph and indexed with the `english` configuration.
  * access: 80% of repositories public; the benchmark searches as a non-admin principal
    with grants on half of the private ones, so the ACL filter is in every query.
Rows are staged with COPY and inserted with INSERT ... SELECT; the HNSW, GIN and trigram
indexes are built after the load, and the term statistics BM25 reads are written as
publication writes them. Then two RetrievalService servers run on 127.0.0.1:0 against
the same database, RETRIEVAL_STREAMS_CONCURRENT=true and false, and each query goes to
both (alternating the order), after a warm-up pass.

    .venv/bin/python -m bench.search                   # 100k nodes, 120 queries x 3 rounds
    .venv/bin/python -m bench.search --nodes 20000 --queries 30 --rounds 1   # quick look
    .venv/bin/python -m bench.search --nodes 20000 --queries 30 --rounds 1 --explain 10 \
        --json out.json   # + EXPLAIN ANALYZE of every stream query, headline figures in JSON

Run it as a module from the repository root. Without COGRAPH_DATABASE_URL an embedded
PostgreSQL is started in a temporary directory; with it, a scratch database is created on
that server and dropped afterwards. It needs no `cograph up`: without a configured internal
secret it makes its own (bench/internal_auth.py). `--explain N` also runs, for the first N
queries, the vector query as it was before issue 29 (joined to its owners) as the baseline.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import re
import sysconfig
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt
from pgvector.asyncpg import register_vector

from bench.databases import scratch_database
from bench.internal_auth import signed_channel, with_secret
from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_api.access_rules import Viewer
from cograph_api.embedder_client import EmbedderClient
from commons.app import MIGRATIONS as COMMONS_MIGRATIONS
from commons.app import CommonsApp, start_commons
from commons.settings import CommonsSettings
from embedder.app import EmbedderApp, start_embedder
from embedder.settings import EmbedderSettings
from retrieval import term_statistics
from retrieval.app import MIGRATIONS, RetrievalApp, start_retrieval
from retrieval.indexing.summaries import SummaryInput, extractive_summary
from retrieval.layers import Store, Unit
from retrieval.search import search_sql
from retrieval.search.lexemes import lexical_text
from retrieval.search.query_text import code_tsquery, doc_tsquery
from retrieval.search.search_settings import DEFAULT_CANDIDATE_CAP
from retrieval.search.search_sql import Scope
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from svckit.migrations import migrate

REPO_ROOT = Path(__file__).resolve().parent.parent
MODEL_CACHE = REPO_ROOT / ".cograph" / "test-models"  # shared with the tests: export once
PRINCIPAL = "bench-user"
METADATA = ({"x-cograph-principal": PRINCIPAL, "x-cograph-admin": "0"}).items()
BODY_CHARS = 2000
DOC_CHUNK_CHARS = 1200
DIM = 384
Vectors = npt.NDArray[np.float32]

# Indexes dropped for the bulk load and rebuilt after it (names from 0001_indexing.sql).
HEAVY_INDEXES = {
    "code_nodes_embedding": "code_nodes USING hnsw (embedding vector_cosine_ops)",
    "code_nodes_summary_embedding": "code_nodes USING hnsw (summary_embedding vector_cosine_ops)",
    "code_nodes_tsv": "code_nodes USING gin (tsv)",
    "code_nodes_summary_tsv": "code_nodes USING gin (summary_tsv)",
    "code_nodes_qname_trgm": "code_nodes USING gin (qualified_name gin_trgm_ops)",
    "code_nodes_qname_trigrams": "code_nodes "
    "((coalesce(array_length(show_trgm(qualified_name), 1), 0)))",
    "repo_docs_embedding": "repo_docs USING hnsw (embedding vector_cosine_ops)",
    "repo_docs_tsv": "repo_docs USING gin (tsv)",
}


# ---------------------------------------------------------------- corpus


@dataclass
class Node:
    package: str
    path: str
    qualified_name: str
    name: str
    kind: str
    start_line: int
    end_line: int
    signature: str
    docstring: str | None
    body: str
    summary: str = ""


@dataclass
class Doc:
    package: str
    path: str
    heading_path: list[str]
    start_line: int
    end_line: int
    body: str


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _packages(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and p.name.isidentifier() and not p.name.startswith("_")
    )


def _signature(lines: list[str], node: ast.AST) -> str:
    start = getattr(node, "lineno", 1) - 1
    head = []
    for line in lines[start : start + 8]:
        head.append(line.strip())
        if line.rstrip().endswith(":"):
            break
    return " ".join(head)[:400]


def _walk_file(package: str, root: Path, path: Path, out: list[Node], limit: int) -> None:
    try:
        # PostgreSQL text cannot hold NUL; a few generated sources contain it.
        text = path.read_text(errors="replace").replace("\x00", "")
        tree = ast.parse(text)
    except (SyntaxError, ValueError, OSError, RecursionError):
        return
    lines = text.splitlines()
    relative = path.relative_to(root).as_posix()
    module = relative[: -len(".py")].replace("/", ".").removesuffix(".__init__")

    def visit(parent: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(parent):
            if len(out) >= limit:
                return
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualified = f"{prefix}.{child.name}"
                end = getattr(child, "end_lineno", child.lineno) or child.lineno
                body = "\n".join(lines[child.lineno - 1 : end])[:BODY_CHARS]
                is_class = isinstance(child, ast.ClassDef)
                kind = "class" if is_class else ("method" if prefix != module else "function")
                out.append(
                    Node(
                        package,
                        relative,
                        qualified,
                        child.name,
                        kind,
                        child.lineno,
                        end,
                        _signature(lines, child),
                        (ast.get_docstring(child) or "").replace("\x00", "") or None,
                        body,
                    )
                )
                visit(child, qualified)

    visit(tree, module)


def real_first(nodes: list[Node], real: int, sample: str, seed: int) -> list[Node]:
    """The nodes reordered so that the `real` ones to embed come first: a seeded sample
    across the whole corpus (`spread`, what a search sees in a real installation), or
    the first `real` in the corpus's sorted order (`first`). With `first` at 20k nodes,
    1,443 of the 1,500 belong to one private repository the benchmark's principal cannot
    read: most prose questions ask about code the searcher may not see, and the vector
    stream walks past that repository's rows (about 1,200 filtered per query) to fill its
    candidate list."""
    if sample == "first" or real >= len(nodes):
        return nodes
    chosen = set(random.Random(seed).sample(range(len(nodes)), real))
    return [nodes[i] for i in sorted(chosen)] + [
        node for i, node in enumerate(nodes) if i not in chosen
    ]


def collect_nodes(limit: int) -> list[Node]:
    root = _site_packages()
    nodes: list[Node] = []
    for package in _packages(root):
        for path in sorted(package.rglob("*.py")):
            if len(nodes) >= limit:
                return nodes
            _walk_file(package.name, root, path, nodes, limit)
    return nodes


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def _chunks(package: str, path: str, text: str, out: list[Doc]) -> None:
    headings: list[str] = []
    buffer: list[str] = []
    start = 1

    def flush(end: int) -> None:
        body = "\n".join(buffer).strip()
        if len(body) > 40:
            out.append(Doc(package, path, list(headings), start, end, body[:DOC_CHUNK_CHARS]))

    for number, line in enumerate(text.splitlines(), start=1):
        match = _HEADING.match(line)
        if match or sum(len(b) for b in buffer) > DOC_CHUNK_CHARS:
            flush(number - 1)
            buffer, start = [], number
            if match:
                level = len(match.group(1))
                headings = [*headings[: level - 1], match.group(2).strip()]
                continue
        buffer.append(line)
    flush(start + len(buffer))


def collect_docs(limit: int) -> list[Doc]:
    root = _site_packages()
    docs: list[Doc] = []
    sources = sorted(root.glob("*.dist-info/METADATA")) + sorted(root.rglob("*.md"))
    for path in sources:
        if len(docs) >= limit:
            break
        package = (
            path.parent.name.split("-")[0].lower()
            if path.name == "METADATA"
            else (path.relative_to(root).parts[0])
        )
        try:
            text = path.read_text(errors="replace").replace("\x00", "")
        except OSError:
            continue
        _chunks(package, path.relative_to(root).as_posix(), text, docs)
    return docs[:limit]


def summarize(node: Node) -> str:
    return extractive_summary(
        SummaryInput(
            qualified_name=node.qualified_name,
            kind=node.kind,
            language="python",
            signature=node.signature,
            docstring=node.docstring,
            body=node.body,
        )
    )


# ---------------------------------------------------------------- loading


def random_unit(rng: np.random.Generator, count: int) -> Vectors:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


# How far a `--filler near` vector lies from the real one it copies: noise of this norm
# relative to the unit vector (cosine similarity to the original about 0.7).
NEAR_NOISE = 1.0


def near_copies(rng: np.random.Generator, real: Vectors, count: int) -> Vectors:
    """`count` unit vectors, each a real one plus noise: the filler keeps the clustered
    shape of real embeddings. Uniformly random filler is the worst case for HNSW (every
    filler row is about equally far from every query, so the graph search has nothing to
    follow through them); a real corpus is all clusters."""
    if len(real) == 0 or count <= 0:
        return random_unit(rng, max(count, 0))
    sources = real[rng.integers(0, len(real), size=count)]
    vectors = sources + NEAR_NOISE * random_unit(rng, count)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


async def collect_corpus(
    nodes: int, docs: int, real: int, sample: str, seed: int
) -> tuple[list[Node], list[Doc]]:
    """The code nodes (the `real` ones to embed first, real_first) with their summaries,
    and the doc chunks."""
    collected = await asyncio.to_thread(collect_nodes, nodes)
    for node in collected:
        node.summary = summarize(node)
    found = real_first(with_forks(collected, nodes), real, sample, seed)
    chunks = await asyncio.to_thread(collect_docs, docs)
    return found, chunks


def with_forks(nodes: list[Node], wanted: int) -> list[Node]:
    """`nodes`, then copies of them under other packages (`<package>-fork2`, ...: each its
    own repository) until there are `wanted`. The installed packages hold about 310k
    definitions; a company's million holds forks and vendored copies too, and so does this
    index past the packages' own. A copy's vector is filler like any row past --real."""
    out = list(nodes)
    fork = 2
    while nodes and len(out) < wanted:
        for node in nodes[: wanted - len(out)]:
            out.append(dataclasses.replace(node, package=f"{node.package}-fork{fork}"))
        fork += 1
    return out


# Doc chunks with real embeddings (the rest are filler like the nodes beyond --real).
REAL_DOCS = 500


@dataclass
class CorpusVectors:
    nodes: Vectors
    summaries: Vectors
    docs: Vectors
    real: int  # nodes (and summaries) with real embeddings: the first ones
    real_docs: int

    @property
    def embedded(self) -> int:
        return 2 * self.real + self.real_docs


async def corpus_vectors(
    client: EmbedderClient,
    nodes: list[Node],
    docs: list[Doc],
    *,
    real: int,
    filler: str,
    rng: np.random.Generator,
) -> CorpusVectors:
    """Real embeddings (the running embedder) for the first `real` nodes, their summaries
    and the first REAL_DOCS doc chunks; the other rows get `filler` vectors: uniformly
    random (`random`) or noisy copies of the real ones (`near`)."""
    real = min(real, len(nodes))
    real_docs = min(REAL_DOCS, len(docs))
    node_vectors = random_unit(rng, len(nodes))
    summary_vectors = random_unit(rng, len(nodes))
    doc_vectors = random_unit(rng, len(docs))
    node_vectors[:real] = await embed_all(
        client, [f"{n.qualified_name}\n{n.signature}\n{n.body}" for n in nodes[:real]]
    )
    summary_vectors[:real] = await embed_all(client, [n.summary for n in nodes[:real]])
    doc_vectors[:real_docs] = await embed_all(
        client, [" ".join(d.heading_path) + "\n" + d.body for d in docs[:real_docs]]
    )
    if filler == "near":
        for vectors, embedded in (
            (node_vectors, real),
            (summary_vectors, real),
            (doc_vectors, real_docs),
        ):
            vectors[embedded:] = near_copies(rng, vectors[:embedded], len(vectors) - embedded)
    return CorpusVectors(node_vectors, summary_vectors, doc_vectors, real, real_docs)


async def embed_all(client: EmbedderClient, texts: list[str], batch: int = 64) -> Vectors:
    parts = [
        await client.embed([t[:2000] for t in texts[i : i + batch]], timeout=300)
        for i in range(0, len(texts), batch)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, DIM), dtype=np.float32)


def _date(rng: random.Random) -> datetime:
    return datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(0, 730))


async def load(
    conn: asyncpg.Connection,
    nodes: list[Node],
    docs: list[Doc],
    *,
    node_vectors: Vectors,
    summary_vectors: Vectors,
    doc_vectors: Vectors,
    seed: int,
    maintenance_mb: int = 1024,
) -> dict[str, float]:
    """The corpus as publication leaves it: rows, indexes (built after the rows, with
    `maintenance_mb` of maintenance_work_mem: an HNSW graph that outgrows it builds several
    times slower), term statistics and row counts."""
    rng = random.Random(seed)
    # One repository per top-level package; distributions that differ only in case
    # (fontTools / fonttools) share one, since slugs are lower-case.
    packages = sorted({n.package.lower() for n in nodes} | {d.package.lower() for d in docs})
    repo_ids: dict[str, int] = {}
    private = 0
    for package in packages:
        public = rng.random() < 0.8
        repo_ids[package] = await conn.fetchval(
            "INSERT INTO repositories (slug, source, source_kind, public, indexed_at) "
            "VALUES ($1, $2, 'dir', $3, now()) RETURNING id",
            f"pypi.org/{package}/{package}",
            f"/site-packages/{package}",
            public,
        )
        if not public:
            private += 1
            if private % 2:
                await conn.execute(
                    "INSERT INTO grants (principal_id, repository_id) VALUES ($1, $2)",
                    PRINCIPAL,
                    repo_ids[package],
                )
    for name in HEAVY_INDEXES:
        await conn.execute(f"DROP INDEX IF EXISTS {name}")
    async with conn.transaction():
        await conn.execute(
            """CREATE TEMP TABLE stage_nodes (
                repository_id bigint, path text, qualified_name text, name text, kind text,
                start_line int, end_line int, signature text, body text, docstring text,
                created_at timestamptz, last_changed_at timestamptz, a text, b text, c text,
                d text, embedding vector(384), summary text, summary_text text,
                summary_embedding vector(384)) ON COMMIT DROP"""
        )
        records = []
        for i, node in enumerate(nodes):
            created = _date(rng)
            changed = created + timedelta(days=rng.randrange(0, 200))
            records.append(
                (
                    repo_ids[node.package.lower()],
                    node.path,
                    node.qualified_name,
                    node.name,
                    node.kind,
                    node.start_line,
                    node.end_line,
                    node.signature,
                    node.body,
                    node.docstring,
                    created,
                    changed,
                    lexical_text(f"{node.qualified_name} {node.name}"),
                    lexical_text(node.signature),
                    lexical_text(node.docstring or ""),
                    lexical_text(node.body),
                    node_vectors[i],
                    node.summary,
                    lexical_text(node.summary),
                    summary_vectors[i],
                )
            )
        # PostgreSQL text cannot hold NUL (docstrings may spell one as an escape).
        clean: list[tuple[Any, ...]] = [
            tuple(v.replace("\x00", "") if isinstance(v, str) else v for v in record)
            for record in records
        ]
        await conn.copy_records_to_table("stage_nodes", records=clean)
        await conn.execute(
            """INSERT INTO code_nodes (repository_id, path, language, qualified_name, name,
                kind, start_line, end_line, signature, body, docstring, content_hash,
                created_at, last_changed_at, tsv, embedding, summary, summary_tsv,
                summary_embedding)
            SELECT repository_id, path, 'python', qualified_name, name, kind, start_line,
                end_line, signature, body, docstring, 'bench', created_at, last_changed_at,
                setweight(to_tsvector('simple', a), 'A') || setweight(to_tsvector('simple', b), 'B')
                || setweight(to_tsvector('simple', c), 'C')
                || setweight(to_tsvector('simple', d), 'D'),
                embedding, summary, to_tsvector('simple', summary_text), summary_embedding
            FROM stage_nodes"""
        )
        await conn.execute(
            """CREATE TEMP TABLE stage_docs (repository_id bigint, path text,
                heading_path text[], start_line int, end_line int, body text,
                updated_at timestamptz, embedding vector(384)) ON COMMIT DROP"""
        )
        await conn.copy_records_to_table(
            "stage_docs",
            records=[
                (
                    repo_ids[d.package.lower()],
                    d.path,
                    d.heading_path,
                    d.start_line,
                    d.end_line,
                    d.body,
                    _date(rng),
                    doc_vectors[i],
                )
                for i, d in enumerate(docs)
            ],
        )
        await conn.execute(
            """INSERT INTO repo_docs (repository_id, path, heading_path, start_line, end_line,
                body, content_hash, updated_at, tsv, embedding)
            SELECT repository_id, path, heading_path, start_line, end_line, body, 'bench',
                updated_at,
                setweight(to_tsvector('english', array_to_string(heading_path, ' ')), 'A')
                || setweight(to_tsvector('english', body), 'D'),
                embedding
            FROM stage_docs"""
        )
    await conn.execute(f"SET maintenance_work_mem = '{maintenance_mb}MB'")
    for name, definition in HEAVY_INDEXES.items():
        await conn.execute(f"CREATE INDEX {name} ON {definition}")
    # What publication writes: the term statistics BM25 reads (term_statistics.py), timed
    # per repository (publication recounts a repository's statistics in its transaction).
    sizes = dict(await conn.fetch("SELECT repository_id, count(*) FROM code_nodes GROUP BY 1"))
    refresh_s: dict[int, float] = {}
    for repo_id in repo_ids.values():
        started = time.perf_counter()
        await term_statistics.refresh(conn, term_statistics.REPOSITORY_FIELDS, repo_id, 0)
        refresh_s[repo_id] = time.perf_counter() - started
    largest = max(refresh_s, key=lambda r: sizes.get(r, 0))
    # What publication records with them (index_store.py): the rows each repository holds,
    # which the vector streams weigh against the table's to choose the index or an exact
    # scan (search_sql.use_index).
    await conn.execute(
        "UPDATE repositories r SET "
        "node_count = (SELECT count(*) FROM code_nodes WHERE repository_id = r.id), "
        "doc_chunk_count = (SELECT count(*) FROM repo_docs WHERE repository_id = r.id)"
    )
    await conn.execute("ANALYZE")
    return {
        "repositories": len(packages),
        "private": private,
        "term_statistics_s": round(sum(refresh_s.values()), 2),
        "largest_repository_nodes": sizes.get(largest, 0),
        "largest_repository_term_statistics_s": round(refresh_s[largest], 3),
    }


# ---------------------------------------------------------------- queries


@dataclass(frozen=True)
class Query:
    kind: str  # symbol | signature | prose
    text: str


def make_queries(nodes: list[Node], real: int, count: int, seed: int) -> list[Query]:
    rng = random.Random(seed)
    per_kind = max(1, count // 3)
    named = [n for n in nodes if len(n.name) > 3 and not n.name.startswith("_")]
    documented = [n for n in nodes[:real] if n.docstring and len(n.docstring.split()) >= 5] or named
    queries = [Query("symbol", n.name) for n in rng.sample(named, per_kind)]
    queries += [Query("signature", n.signature.rstrip(":")) for n in rng.sample(named, per_kind)]
    for node in rng.sample(documented, min(per_kind, len(documented))):
        sentence = re.split(r"(?<=[.!?])\s", " ".join((node.docstring or "").split()))[0]
        queries.append(Query("prose", sentence[:200]))
    return queries


# ---------------------------------------------------------------- measuring


@dataclass
class Samples:
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    server_ms: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, mode: str, kind: str, ms: float, timings: dict[str, float]) -> None:
        self.latency_ms.setdefault(mode, []).append(ms)
        self.latency_ms.setdefault(f"{mode}/{kind}", []).append(ms)
        phases = self.server_ms.setdefault(mode, {})
        for name, value in timings.items():
            phases.setdefault(name, []).append(value)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def timed_search(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, text: str
) -> tuple[float, pb.SearchResponse]:
    started = time.perf_counter()
    reply = await stub.Search(pb.SearchRequest(query=text), metadata=tuple(METADATA), timeout=60)
    return (time.perf_counter() - started) * 1000, reply


@asynccontextmanager
async def retrieval_server(
    db_url: str,
    workdir: Path,
    embedder_addr: str,
    concurrent: bool,
    *,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[RetrievalApp, retrieval_pb2_grpc.RetrievalServiceAsyncStub]]:
    settings = RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": db_url,
                    "COGRAPH_DATA_DIR": str(workdir / "data"),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    "EMBEDDER_ADDR": embedder_addr,
                    "RETRIEVAL_STREAMS_CONCURRENT": "true" if concurrent else "false",
                    **(extra_env or {}),
                }
            )
        )
    )
    app = await start_retrieval(settings)
    try:
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            yield app, retrieval_pb2_grpc.RetrievalServiceStub(channel)
    finally:
        await app.stop()


# ---------------------------------------------------------------- notes beside code (--notes)

NOTES_AUTHOR = "bench-notes"


async def anchor_notes(conn: asyncpg.Connection, every: int, vector: Vectors) -> int:
    """One note, by another principal, anchored to every `every`th code node (by id): what
    the commons' NotesForCode finds beside search results. The notes carry a vector, so the
    commons' backfill has nothing to embed during the run. How many notes."""
    await conn.execute("INSERT INTO users (principal_id) VALUES ($1)", NOTES_AUTHOR)
    await conn.execute(
        "INSERT INTO posts (author_id, title, body, embedding) "
        "SELECT u.id, 'about node ' || n.id, 'bench', $3 FROM code_nodes n, users u "
        "WHERE n.id % $1 = 0 AND n.kind <> 'chunk' AND u.principal_id = $2",
        every,
        NOTES_AUTHOR,
        vector,
    )
    count: int = await conn.fetchval(
        "WITH made AS (INSERT INTO post_anchors (post_id, repository_id, repo, qualified_name, "
        "path, start_line, end_line, kind, signature_hash, body_hash, commit_sha, generation, "
        "checked_commit, checked_generation) "
        "SELECT p.id, n.repository_id, r.slug, n.qualified_name, n.path, n.start_line, "
        "n.end_line, n.kind, '', '', 'bench', 1, 'bench', 1 FROM posts p "
        "JOIN code_nodes n ON p.title = 'about node ' || n.id "
        "JOIN repositories r ON r.id = n.repository_id RETURNING 1) SELECT count(*) FROM made"
    )
    await conn.execute("ANALYZE posts; ANALYZE post_anchors; ANALYZE users")
    return count


@asynccontextmanager
async def commons_server(db_url: str, embedder_addr: str) -> AsyncIterator[CommonsApp]:
    """The commons on the benchmark's database, its background loops idle."""
    settings = CommonsSettings.from_env(
        Env(
            with_secret(
                {
                    "COMMONS_LISTEN": "127.0.0.1:0",
                    "COGRAPH_DATABASE_URL": db_url,
                    "EMBEDDER_ADDR": embedder_addr,
                    "COMMONS_ANCHOR_CHECK_INTERVAL_S": "86400",
                    "COMMONS_BACKFILL_INTERVAL_S": "86400",
                }
            )
        )
    )
    app = await start_commons(settings)
    try:
        yield app
    finally:
        await app.stop()


async def explain_vector(conn: asyncpg.Connection, vector: Vectors, cap: int) -> str:
    """The plan of the code-body vector query a search runs (its own settings)."""
    scope = Scope(Viewer(PRINCIPAL, False))
    async with conn.transaction():
        statement = await search_sql.vector_statement(
            conn, "code", "body", scope=scope, vector=vector, cap=cap
        )
        if statement is None:
            return "nothing readable"
        await conn.execute(statement.settings)
        rows = await conn.fetch("EXPLAIN " + statement.sql, *statement.args)
    plan = "\n".join(row[0] for row in rows)
    return "HNSW index scan" if "code_nodes_embedding" in plan else "no HNSW:\n" + plan


# The vector query's settings before issue 29 (search_sql.run_vector then).
OLD_SETTINGS = "SET LOCAL hnsw.ef_search = 300; SET LOCAL hnsw.iterative_scan = relaxed_order"


def join_vector_sql(
    store: Store, unit: Unit, scope: Scope, vector: Vectors, cap: int
) -> tuple[str, list[Any]]:
    """The vector query as it was before issue 29: the store's table joined to its owners
    for the access filter and the published generation, ordered by distance. Built from
    the filters search_sql still uses for the lexical and symbol streams."""
    params = search_sql._Params()
    source, where = search_sql._source(store, scope, params)
    column = "t.summary_embedding" if unit == "summary" else "t.embedding"
    query = params.add(vector)
    return (
        f"SELECT t.id, 1 - ({column} <=> {query}) AS score FROM {source} "
        f"WHERE {column} IS NOT NULL AND {' AND '.join(where)} "
        f"ORDER BY {column} <=> {query} LIMIT {params.add(cap)}",
        params.values,
    )


async def profile_streams(
    conn: asyncpg.Connection, texts: list[str], vectors: Vectors, cap: int
) -> dict[str, dict[str, Any]]:
    """EXPLAIN ANALYZE of every stream query of a default search, per query text: the
    database's own execution time (p50 over the texts) and the vector queries' plan."""
    scope = Scope(Viewer(PRINCIPAL, False))
    times: dict[str, list[float]] = {}
    plans: dict[str, set[str]] = {}

    async def analyze(label: str, settings: str, sql: str, args: list[Any]) -> None:
        async with conn.transaction():
            if settings:
                await conn.execute(settings)
            rows = await conn.fetch("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args)
        plan = json.loads(rows[0][0])[0]
        times.setdefault(label, []).append(plan["Execution Time"])
        if label.startswith("vector/"):
            scan = plan["Plan"]
            while scan.get("Plans") and "Index Name" not in scan:
                scan = scan["Plans"][0]
            index = scan.get("Index Name", "")
            plans.setdefault(label, set()).add("hnsw" if "embedding" in index else "other")
            # Where the time goes: the scan under the LIMIT, and the rows its filter dropped.
            times.setdefault(f"{label} (scan node)", []).append(scan["Actual Total Time"])
            removed = float(scan.get("Rows Removed by Filter", 0))
            times.setdefault(f"{label} (rows filtered)", []).append(removed)

    units: tuple[tuple[Store, Unit], ...] = (
        ("code", "body"),
        ("code", "summary"),
        ("repo_docs", "doc"),
    )
    for text, vector in zip(texts, vectors, strict=True):
        for store, unit in units:
            # The baseline, measured in the same run: the query as it was before issue 29.
            sql, args = join_vector_sql(store, unit, scope, vector, cap)
            await analyze(f"vector/{store}/{unit} joined (before)", OLD_SETTINGS, sql, args)
            async with conn.transaction():
                statement = await search_sql.vector_statement(
                    conn, store, unit, scope=scope, vector=vector, cap=cap
                )
            if statement is not None:
                await analyze(
                    f"vector/{store}/{unit}", statement.settings, statement.sql, statement.args
                )
        for store, unit in units:
            tsquery = code_tsquery(text, True) if store == "code" else doc_tsquery(text)
            if tsquery:
                sql, args = search_sql.lexical_sql(store, unit, scope, tsquery, cap)
                await analyze(f"lexical/{store}/{unit}", "", sql, args)
        sql, args = search_sql.symbol_sql(scope, text, cap)
        await analyze("symbol/code/body", search_sql.SYMBOL_SETTINGS, sql, args)
    return {
        label: {"p50_ms": round(pct(values, 0.5), 2), "plans": sorted(plans.get(label, ()))}
        for label, values in sorted(times.items())
    }


@asynccontextmanager
async def embedder() -> AsyncIterator[EmbedderApp]:
    settings = EmbedderSettings.from_env(
        Env(with_secret({"EMBEDDER_LISTEN": "127.0.0.1:0", "EMBEDDER_CACHE_DIR": str(MODEL_CACHE)}))
    )
    app = await start_embedder(settings)
    try:
        yield app
    finally:
        await app.stop()


async def wait_quiet(below: float, max_s: float) -> None:
    """Wait until the one-minute load average is under `below` (other work on the machine
    would be measured as search latency), at most `max_s`; then measure anyway and say so."""
    started = time.monotonic()
    while (load := os.getloadavg()[0]) >= below:
        waited = time.monotonic() - started
        if waited >= max_s:
            print(f"load average still {load:.2f} after {waited:.0f} s; measuring", flush=True)
            return
        print(f"load average {load:.2f}: waiting for under {below}", flush=True)
        await asyncio.sleep(30)


def _batched(items: list[Query], rounds: int, seed: int) -> Iterator[tuple[int, Query]]:
    rng = random.Random(seed)
    for round_no in range(rounds):
        order = list(items)
        rng.shuffle(order)
        for query in order:
            yield round_no, query


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {"nodes_requested": args.nodes, "real_sample": args.real_sample}
    clock = time.perf_counter()
    nodes, docs = await collect_corpus(
        args.nodes, args.docs, args.real, args.real_sample, args.seed
    )
    print(
        f"corpus: {len(nodes)} code nodes, {len(docs)} doc chunks "
        f"({time.perf_counter() - clock:.1f} s)",
        flush=True,
    )
    rng = np.random.default_rng(args.seed)
    env = dict(item.split("=", 1) for item in args.env)
    # The candidate cap the servers run with: the EXPLAIN figures use the same.
    cap = int(env.get("RETRIEVAL_CANDIDATE_CAP", DEFAULT_CANDIDATE_CAP))
    async with (
        scratch_database("bench_search", keep=args.keep) as db_url,
        embedder() as embedder_app,
    ):
        await migrate(db_url, "retrieval", MIGRATIONS)
        if args.keep:
            print(f"database: {db_url.split('?')[0].rsplit('/', 1)[-1]} (kept)", flush=True)
        embedder_addr = f"127.0.0.1:{embedder_app.port}"
        channel = signed_channel(embedder_addr)
        client = EmbedderClient(channel, timeout_s=2.0)
        clock = time.perf_counter()
        vectors = await corpus_vectors(
            client, nodes, docs, real=args.real, filler=args.filler, rng=rng
        )
        real = vectors.real
        print(
            f"embedded {vectors.embedded} texts ({time.perf_counter() - clock:.1f} s)",
            flush=True,
        )
        clock = time.perf_counter()
        conn = await asyncpg.connect(db_url)
        try:
            await register_vector(conn)
            shape = await load(
                conn,
                nodes,
                docs,
                node_vectors=vectors.nodes,
                summary_vectors=vectors.summaries,
                doc_vectors=vectors.docs,
                seed=args.seed,
                maintenance_mb=args.maintenance_mb,
            )
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM code_nodes) AS nodes, "
                "(SELECT count(*) FROM repo_docs) AS docs"
            )
            plan = await explain_vector(conn, vectors.nodes[0], cap)
            report["storage_bytes"] = await storage(conn)
            if args.notes:
                await migrate(db_url, "commons", COMMONS_MIGRATIONS)
                report["anchored_notes"] = await anchor_notes(conn, args.notes, vectors.nodes[0])
        finally:
            await conn.close()
        report.update(
            nodes=counts["nodes"],
            doc_chunks=counts["docs"],
            **shape,
            vector_plan=plan,
            load_s=round(time.perf_counter() - clock, 1),
        )
        print(
            f"loaded {counts['nodes']} nodes, {counts['docs']} doc chunks in "
            f"{shape['repositories']} repositories ({shape['private']} private); term "
            f"statistics {shape['term_statistics_s']} s in all, the largest repository "
            f"({shape['largest_repository_nodes']} nodes) "
            f"{shape['largest_repository_term_statistics_s']} s "
            f"({report['load_s']} s); vector stream plan: {plan}",
            flush=True,
        )

        queries = make_queries(nodes, real, args.queries, args.seed)
        if args.quiet_below:
            await wait_quiet(args.quiet_below, args.quiet_max_s)
        report["load_average_before"] = round(os.getloadavg()[0], 2)
        # The query embedding on its own: what the vector stream waits for first.
        embed_ms = []
        for query in queries:
            started = time.perf_counter()
            await client.embed([query.text])
            embed_ms.append((time.perf_counter() - started) * 1000)
        if args.explain:
            conn = await asyncpg.connect(db_url)
            try:
                await register_vector(conn)
                texts = [q.text for q in queries[: args.explain]]
                query_vectors = await embed_all(client, texts)
                report["explain_analyze"] = await profile_streams(conn, texts, query_vectors, cap)
            finally:
                await conn.close()
        await channel.close(None)

        samples = Samples()
        workdir = Path(args.workdir)
        report["settings"] = env
        async with contextlib.AsyncExitStack() as servers:
            _, conc = await servers.enter_async_context(
                retrieval_server(db_url, workdir, embedder_addr, True, extra_env=env)
            )
            _, seq = await servers.enter_async_context(
                retrieval_server(db_url, workdir, embedder_addr, False, extra_env=env)
            )
            stubs = {"concurrent": conc, "sequential": seq}
            if args.notes:
                # The concurrent server again, asking the commons for the notes beside its
                # results: against "concurrent", what notes add to a search.
                commons = await servers.enter_async_context(commons_server(db_url, embedder_addr))
                notes_env = {**env, "COMMONS_ADDR": f"127.0.0.1:{commons.port}"}
                _, stubs["notes"] = await servers.enter_async_context(
                    retrieval_server(db_url, workdir, embedder_addr, True, extra_env=notes_env)
                )
            for query in queries:  # warm-up: caches, connections, plans
                for stub in stubs.values():
                    await timed_search(stub, query.text)
            flip = False
            for _, query in _batched(queries, args.rounds, args.seed):
                modes = list(stubs)
                if flip:
                    modes.reverse()
                flip = not flip
                for mode in modes:
                    ms, reply = await timed_search(stubs[mode], query.text)
                    samples.add(mode, query.kind, ms, dict(reply.timings_ms))
            report["load_average_after"] = round(os.getloadavg()[0], 2)
    report["query_embed_ms"] = {"p50": pct(embed_ms, 0.5), "p95": pct(embed_ms, 0.95)}
    report["latency_ms"] = {
        key: {"p50": pct(v, 0.5), "p95": pct(v, 0.95), "n": len(v)}
        for key, v in sorted(samples.latency_ms.items())
    }
    # The headline figures, at the top level where a script comparing runs looks for them.
    lat = report["latency_ms"]
    report.update(
        concurrent_p50_ms=lat["concurrent"]["p50"],
        concurrent_p95_ms=lat["concurrent"]["p95"],
        sequential_p50_ms=lat["sequential"]["p50"],
        sequential_p95_ms=lat["sequential"]["p95"],
        embed_p50_ms=report["query_embed_ms"]["p50"],
    )
    if "notes" in lat:
        report.update(
            notes_p50_ms=lat["notes"]["p50"],
            notes_added_p50_ms=round(lat["notes"]["p50"] - lat["concurrent"]["p50"], 2),
        )
    report["server_phase_ms_p50"] = {
        mode: {name: pct(values, 0.5) for name, values in sorted(phases.items())}
        for mode, phases in samples.server_ms.items()
    }
    return report


async def storage(conn: asyncpg.Connection) -> dict[str, int]:
    """Bytes on disk: each code store with its indexes and TOAST, and the whole database
    (docs/scaling.md divides them by the node count)."""
    row = await conn.fetchrow(
        "SELECT pg_total_relation_size('code_nodes') AS code_nodes,"
        " pg_indexes_size('code_nodes') AS code_nodes_indexes,"
        " pg_total_relation_size('repo_docs') AS repo_docs,"
        " pg_total_relation_size('file_contents') AS file_contents,"
        " pg_database_size(current_database()) AS database"
    )
    return {key: int(value) for key, value in row.items()}


def print_report(report: dict[str, Any]) -> None:
    lat = report["latency_ms"]
    conc, seq = lat["concurrent"], lat["sequential"]
    print()
    print(
        f"Search over gRPC, {report['nodes']} code nodes + {report['doc_chunks']} doc chunks, "
        f"broad layers (code, ast_summary, repo_doc), top_k 10, non-admin principal"
    )
    sizes = report.get("storage_bytes")
    if sizes:
        per_node = sizes["code_nodes"] / max(1, report["nodes"])
        print(
            f"storage: code_nodes {sizes['code_nodes'] / 1e6:.1f} MB ({per_node / 1e3:.1f} kB a "
            f"node, indexes {sizes['code_nodes_indexes'] / 1e6:.1f} MB), database "
            f"{sizes['database'] / 1e6:.1f} MB"
        )
    print(
        f"load average (1 min) before measuring {report['load_average_before']}, after "
        f"{report['load_average_after']}"
    )
    print(f"{'':24}{'p50 ms':>10}{'p95 ms':>10}{'n':>6}")
    for key in sorted(lat):
        print(f"{key:24}{lat[key]['p50']:>10.1f}{lat[key]['p95']:>10.1f}{lat[key]['n']:>6}")
    print(
        f"sequential / concurrent: p50 x{seq['p50'] / conc['p50']:.2f}, "
        f"p95 x{seq['p95'] / conc['p95']:.2f}"
    )
    embed = report["query_embed_ms"]
    print(
        f"query embedding alone (EmbedderClient.embed, 1 text): p50 {embed['p50']:.1f} ms, "
        f"p95 {embed['p95']:.1f} ms"
    )
    if "notes" in lat:
        print(
            f"notes beside code ({report['anchored_notes']} anchored notes): p50 "
            f"{lat['notes']['p50']:.1f} ms against {conc['p50']:.1f} without, "
            f"{report['notes_added_p50_ms']:+.1f} ms"
        )
    for label, figures in report.get("explain_analyze", {}).items():
        plans = "/".join(figures["plans"])
        unit = "" if label.endswith("(rows filtered)") else " ms"
        print(f"EXPLAIN ANALYZE p50 {label}: {figures['p50_ms']:.1f}{unit} {plans}")
    for mode, phases in report["server_phase_ms_p50"].items():
        shown = ", ".join(
            f"{name} {value:.1f}"
            for name, value in phases.items()
            if name in ("embed", "streams", "fuse", "hydrate", "notes", "total")
        )
        print(f"server-side p50 ms ({mode}): {shown}")
        queries = ", ".join(f"{name} {value:.1f}" for name, value in phases.items() if "/" in name)
        print(f"  per stream query ({mode}): {queries}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="code nodes to index")
    parser.add_argument("--docs", type=int, default=10_000, help="doc chunks to index")
    parser.add_argument("--real", type=int, default=1500, help="nodes with real embeddings")
    parser.add_argument(
        "--real-sample",
        choices=("spread", "first"),
        default="spread",
        help="which nodes get real embeddings (and prose questions): a sample across the "
        "corpus, or the first --real in sorted order (mostly one private repository)",
    )
    parser.add_argument("--queries", type=int, default=120, help="queries (3 kinds)")
    parser.add_argument("--rounds", type=int, default=3, help="measured passes over them")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--json",
        type=Path,
        help="also write the report here (top level: concurrent_p50_ms, concurrent_p95_ms, "
        "sequential_p50_ms, sequential_p95_ms, embed_p50_ms)",
    )
    parser.add_argument(
        "--filler",
        choices=("random", "near"),
        default="random",
        help="vectors of the rows beyond --real: uniformly random unit vectors (the worst "
        "case for HNSW), or noisy copies of the real ones (clustered like a real corpus)",
    )
    parser.add_argument(
        "--explain",
        type=int,
        default=0,
        metavar="N",
        help="EXPLAIN ANALYZE every stream query of the first N queries",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a retrieval setting for every server of the run, e.g. RETRIEVAL_CANDIDATE_CAP=100",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with COGRAPH_DATABASE_URL, keep the scratch database afterwards (its name is "
        "printed) to EXPLAIN queries on it by hand",
    )
    parser.add_argument(
        "--notes",
        type=int,
        default=0,
        metavar="EVERY",
        help="also run a commons with a note anchored to every EVERYth code node and a third "
        "server (concurrent) that shows them beside its results (mode 'notes')",
    )
    parser.add_argument(
        "--maintenance-mb",
        type=int,
        default=1024,
        help="maintenance_work_mem for the index builds (at 1M nodes an HNSW graph needs "
        "about 2 GB to build in memory)",
    )
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=0.0,
        metavar="LOAD",
        help="after loading, wait until the one-minute load average is under LOAD before "
        "measuring (at most --quiet-max-s); the report records the load before and after",
    )
    parser.add_argument("--quiet-max-s", type=float, default=7200.0)
    parser.add_argument("--workdir", default=tempfile.gettempdir())
    args = parser.parse_args()
    for item in args.env:
        if "=" not in item or not item.split("=", 1)[0].isidentifier():
            parser.error(f"--env takes NAME=VALUE, got {item!r}")
    report = asyncio.run(run(args))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()

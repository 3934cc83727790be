"""Query sets with known answers, rebuilt from the machine's own packages on every run.

Four classes (issue 8):
- symbol: a definition's name, bare or qualified -> that definition;
- signature: its declaration line, lightly perturbed -> that definition;
- semantic: the first sentence of its docstring (JavaScript: leading comment) -> that
  definition, indexed from a copy with those docstrings removed (the CodeSearchNet method),
  so copying words from the query cannot find the answer;
- docs: a question made from a markdown section's heading and first sentence -> that
  section (matched by overlapping lines, as a long section is indexed as several chunks).

The ground truth comes from the project's own parser run over the copy that is indexed,
so qualified names and paths agree with the index by construction; the queries are built
from the source text, never from anything the index computed. Fixed seeds make every run
build the same sets; the manifest records versions, counts and a digest of the sets.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from bench.quality.corpus import (
    Language,
    PackageSource,
    markdown_sources,
    npm_package,
    python_package,
    read_sources,
    strip_docstrings,
    write_tree,
)
from bench.quality.perturb import clean_prose, first_sentence, one_line, perturb_signature
from retrieval.indexing.markdown import chunk_markdown
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.nodes import CodeNode

T = TypeVar("T")
QueryClass = Literal["symbol", "signature", "semantic", "docs"]
QUERY_CLASSES: tuple[QueryClass, ...] = ("symbol", "signature", "semantic", "docs")
SLUG_PREFIX = "local/quality"
DOCS_REPO = "docs"

_DEFINITIONS = frozenset({"function", "method", "class", "struct", "interface", "enum", "trait"})
_CALLABLES = frozenset({"function", "method"})
_NOT_PROSE = re.compile(
    r"^(todo|fixme|xxx|c8|eslint|istanbul|noqa|pragma|type:|@|deprecated)", re.I
)
_BOILERPLATE_HEADING = re.compile(
    r"(licen[sc]e|contribut|changelog|change log|table of contents|^contents$|credits|"
    r"acknowledg|authors?$|sponsor|funding|^support$|^badges?$)",
    re.IGNORECASE,
)
_NOT_PARAGRAPH = ("```", "~~~", "|", "<", "!", "#", "---", "===", "    ", "\t", "[!")
_DOC_TEMPLATES = (
    "How do I {heading} in {package}? {clause}",
    "What does {package} say about {heading}? {clause}",
    "{package} {heading}: {clause}?",
)


@dataclass(frozen=True, slots=True)
class Answer:
    """Where the answer lives: a code node (qualified name) or a doc section (lines)."""

    repo: str
    path: str
    qualified_name: str  # '' for a docs section
    start_line: int
    end_line: int

    def matches(
        self, repo: str, path: str, qualified_name: str, start_line: int, end_line: int
    ) -> bool:
        if repo != self.repo or path != self.path:
            return False
        if self.qualified_name:
            return qualified_name == self.qualified_name
        return start_line <= self.end_line and end_line >= self.start_line

    def key(self) -> tuple[str, str, str]:
        """Identity of a code answer, as graph nodes and results report it."""
        return (self.repo, self.path, self.qualified_name)


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    klass: QueryClass
    variant: str  # bare/qualified, the perturbation, the doc template
    language: str
    text: str
    answer: Answer
    half: int  # 0: the tuning half, 1: the held-out half

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class": self.klass,
            "variant": self.variant,
            "language": self.language,
            "half": self.half,
            "answer": {
                "repo": self.answer.repo,
                "path": self.answer.path,
                "qualified_name": self.answer.qualified_name,
                "start_line": self.answer.start_line,
                "end_line": self.answer.end_line,
            },
        }


@dataclass(frozen=True)
class Plan:
    """What a mode samples."""

    name: str
    python: tuple[str, ...]
    javascript: tuple[str, ...]
    docs_sets: int  # markdown sets to index; 0 means all found
    counts: Mapping[QueryClass, int]
    seed: int


SEED = 20240817
SMALL = Plan(
    "small",
    python=("pathspec",),
    javascript=("minimatch",),
    docs_sets=10,
    counts={"symbol": 100, "signature": 70, "semantic": 70, "docs": 70},
    seed=SEED,
)
FULL = Plan(
    "full",
    python=("jinja2", "click", "httpx", "pathspec", "rich", "markdown_it", "attr"),
    javascript=("semver", "lru-cache", "minimatch", "glob", "minipass", "diff"),
    docs_sets=0,
    counts={"symbol": 1200, "signature": 900, "semantic": 900, "docs": 700},
    seed=SEED,
)
PLANS = {"small": SMALL, "full": FULL}


@dataclass
class RepoCopy:
    """One repository to index: a directory written for this run."""

    name: str
    slug: str
    language: Language
    version: str
    directory: Path
    file_chars: dict[str, int] = field(default_factory=dict)  # whole-file baseline
    nodes: int = 0


@dataclass
class Dataset:
    plan: Plan
    repositories: list[RepoCopy]
    queries: list[Query]
    notes: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """sha256 over the query texts and answers: equal digests, equal query sets."""
        h = hashlib.sha256()
        for query in self.queries:
            h.update(json.dumps([query.text, query.as_dict()], sort_keys=True).encode())
        return h.hexdigest()

    def manifest(self) -> dict[str, Any]:
        """What was sampled: versions, seeds, counts, and the digest; no third-party text."""
        by_class: dict[str, Counter[str]] = defaultdict(Counter)
        for query in self.queries:
            by_class[query.klass]["total"] += 1
            by_class[query.klass][f"variant:{query.variant}"] += 1
            by_class[query.klass][f"language:{query.language}"] += 1
            by_class[query.klass][f"half:{query.half}"] += 1
        return {
            "mode": self.plan.name,
            "seed": self.plan.seed,
            "python": sys.version.split()[0],
            "repositories": [
                {
                    "slug": repo.slug,
                    "language": repo.language,
                    "version": repo.version,
                    "files": len(repo.file_chars),
                    "nodes_or_sections": repo.nodes,
                }
                for repo in self.repositories
            ],
            "queries": {k: dict(sorted(v.items())) for k, v in sorted(by_class.items())},
            "query_count": len(self.queries),
            "digest": self.digest(),
            "notes": self.notes,
        }


def slug_of(name: str) -> str:
    return f"{SLUG_PREFIX}/{name}"


def usable_sentence(sentence: str, min_words: int) -> bool:
    words = sentence.split()
    return (
        min_words <= len(words) <= 40
        and sentence[:1].isalpha()
        and not _NOT_PROSE.match(sentence)
        and "://" not in sentence
    )


def _sample(rng: random.Random, items: list[T], count: int) -> list[T]:
    return rng.sample(items, min(count, len(items)))


def _assign_halves(queries: list[Query], seed: int) -> list[Query]:
    """Alternating halves over a seeded shuffle, per class, so both halves hold every class
    in equal measure."""
    out: list[Query] = []
    for klass in QUERY_CLASSES:
        members = [q for q in queries if q.klass == klass]
        rng = random.Random(f"{seed}-halves-{klass}")
        order = list(range(len(members)))
        rng.shuffle(order)
        halves = {index: position % 2 for position, index in enumerate(order)}
        for index, query in enumerate(members):
            out.append(
                Query(
                    f"{klass}-{index:05d}",
                    query.klass,
                    query.variant,
                    query.language,
                    query.text,
                    query.answer,
                    halves[index],
                )
            )
    return out


@dataclass
class _CodeFile:
    repo: str
    language: Language
    path: str
    nodes: list[CodeNode]


def _parse_all(
    parser: CodeParser, repo: str, language: Language, files: dict[str, str]
) -> list[_CodeFile]:
    parsed: list[_CodeFile] = []
    for path, text in files.items():
        result = parser.parse(path, text.encode("utf-8"))
        if result is not None:
            parsed.append(_CodeFile(repo, language, path, list(result.nodes)))
    return parsed


def _answer(repo: str, path: str, node: CodeNode) -> Answer:
    return Answer(slug_of(repo), path, node.qualified_name, node.start_line, node.end_line)


def _definitions(files: list[_CodeFile]) -> list[tuple[_CodeFile, CodeNode]]:
    return [
        (f, n)
        for f in files
        for n in f.nodes
        if n.kind in _DEFINITIONS
        and "#" not in n.qualified_name
        and not (n.name.startswith("__") and n.name.endswith("__"))
        and len(n.name) >= 3
    ]


def build_code(
    plan: Plan, workdir: Path, rng: random.Random
) -> tuple[list[RepoCopy], list[Query], dict[str, Any]]:
    """Copies the code packages (semantic targets' docstrings stripped), then samples the
    symbol, signature and semantic sets from the parse of the copies."""
    sources: list[PackageSource] = []
    missing: list[str] = []
    for name in plan.python:
        found = python_package(name)
        (sources.append(found) if found else missing.append(name))
    for name in plan.javascript:
        found = npm_package(name)
        (sources.append(found) if found else missing.append(name))
    parser = CodeParser()
    texts = {source.name: read_sources(source) for source in sources}
    original: list[_CodeFile] = []
    for source in sources:
        original.extend(_parse_all(parser, source.name, source.language, texts[source.name]))

    # Semantic targets first: their docstrings are cut from the copy that gets indexed.
    sentences: dict[tuple[str, str, str], str] = {}
    seen: Counter[str] = Counter()
    for f, node in _definitions(original):
        if not node.docstring:
            continue
        sentence = first_sentence(node.docstring)
        if usable_sentence(sentence, 5):
            sentences[(f.repo, f.path, node.qualified_name)] = sentence
            seen[sentence.lower()] += 1
    unique = sorted(k for k, s in sentences.items() if seen[s.lower()] == 1)
    targets = set(_sample(rng, unique, plan.counts["semantic"]))
    stripped: set[tuple[str, str, str]] = set()
    for f in original:
        wanted = [n for n in f.nodes if (f.repo, f.path, n.qualified_name) in targets]
        if wanted:
            text, cut = strip_docstrings(texts[f.repo][f.path], f.language, wanted)
            texts[f.repo][f.path] = text
            stripped.update((f.repo, f.path, name) for name in cut)

    repos: list[RepoCopy] = []
    final: list[_CodeFile] = []
    for source in sources:
        directory = workdir / "repos" / source.name
        write_tree(directory, texts[source.name])
        parsed = _parse_all(parser, source.name, source.language, texts[source.name])
        final.extend(parsed)
        repos.append(
            RepoCopy(
                source.name,
                slug_of(source.name),
                source.language,
                source.version,
                directory,
                {path: len(text) for path, text in texts[source.name].items()},
                sum(len(f.nodes) for f in parsed),
            )
        )

    definitions = _definitions(final)
    by_key = {(f.repo, f.path, n.qualified_name): (f, n) for f, n in definitions}
    queries: list[Query] = []
    dropped_semantic = 0
    for key in sorted(targets):
        hit = by_key.get(key)
        if key not in stripped or hit is None or (hit[1].docstring or "").strip():
            dropped_semantic += 1  # the docstring could not be cut cleanly: not a fair test
            continue
        f, node = hit
        queries.append(
            Query(
                "",
                "semantic",
                "docstring",
                f.language,
                sentences[key],
                _answer(f.repo, f.path, node),
                0,
            )
        )

    names = Counter(n.name for f in final for n in f.nodes)
    qualified = Counter(n.qualified_name for f in final for n in f.nodes)
    bare = [(f, n) for f, n in definitions if names[n.name] == 1]
    full = [(f, n) for f, n in definitions if qualified[n.qualified_name] == 1]
    half = plan.counts["symbol"] // 2
    for f, node in _sample(rng, bare, half):
        queries.append(
            Query("", "symbol", "bare", f.language, node.name, _answer(f.repo, f.path, node), 0)
        )
    for f, node in _sample(rng, full, plan.counts["symbol"] - half):
        queries.append(
            Query(
                "",
                "symbol",
                "qualified",
                f.language,
                node.qualified_name,
                _answer(f.repo, f.path, node),
                0,
            )
        )

    lines = Counter(one_line(n.signature) for f in final for n in f.nodes)
    signed = [
        (f, n)
        for f, n in definitions
        if n.kind in _CALLABLES
        and "(" in n.signature
        and 10 <= len(one_line(n.signature)) <= 200
        and lines[one_line(n.signature)] == 1
    ]
    for f, node in _sample(rng, signed, plan.counts["signature"]):
        perturbed = perturb_signature(node.signature, rng)
        if perturbed is None:
            continue
        text, variant = perturbed
        queries.append(
            Query("", "signature", variant, f.language, text, _answer(f.repo, f.path, node), 0)
        )
    notes = {
        "missing_packages": missing,
        "semantic_candidates": len(unique),
        "semantic_sampled": len(targets),
        "semantic_dropped_unstrippable": dropped_semantic,
        "symbol_bare_candidates": len(bare),
        "symbol_qualified_candidates": len(full),
        "signature_candidates": len(signed),
    }
    return repos, queries, notes


def _first_paragraph(body_lines: list[str]) -> str:
    """The first plain paragraph of a section (no code, tables, html, images, headings)."""
    paragraph: list[str] = []
    fenced = False
    for line in body_lines:
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            paragraph = []
            continue
        if fenced:
            continue
        if not stripped:
            if paragraph:
                break
            continue
        if not paragraph and line.startswith(_NOT_PARAGRAPH):
            continue
        if stripped.startswith(("```", "|", "<", "!")):
            break
        paragraph.append(stripped.lstrip("-*> ").strip())
    return " ".join(paragraph)


def build_docs(
    plan: Plan, workdir: Path, rng: random.Random
) -> tuple[list[RepoCopy], list[Query], dict[str, Any]]:
    """One repository of markdown; one query per sampled section."""
    sources = markdown_sources()
    if plan.docs_sets and len(sources) > plan.docs_sets:
        sources = sorted(_sample(rng, sources, plan.docs_sets), key=lambda s: s.name)
    files: dict[str, str] = {}
    contents: set[str] = set()
    for source in sources:
        for path, text in read_sources(source).items():
            if text in contents:  # the same README shipped twice would make two answers
                continue
            contents.add(text)
            files[path] = text
    candidates: list[tuple[str, str, str, int, int]] = []
    sentence_count: Counter[str] = Counter()
    sections = 0
    for path, text in sorted(files.items()):
        runs: list[tuple[tuple[str, ...], int, int]] = []
        for chunk in chunk_markdown(path, text):
            if runs and runs[-1][0] == chunk.heading_path:
                runs[-1] = (chunk.heading_path, runs[-1][1], chunk.end_line)
            else:
                runs.append((chunk.heading_path, chunk.start_line, chunk.end_line))
        repeated = Counter(heading for heading, _, _ in runs)
        lines = text.splitlines()
        for heading_path, start, end in runs:
            sections += 1
            if not heading_path or repeated[heading_path] > 1:
                continue
            heading = clean_prose(heading_path[-1]).strip(" :#")
            if len(heading) < 3 or _BOILERPLATE_HEADING.search(heading):
                continue
            sentence = first_sentence(_first_paragraph(lines[start:end]), max_words=14)
            if not usable_sentence(sentence, 6):
                continue
            candidates.append((path, heading, sentence, start, end))
            sentence_count[sentence.lower()] += 1
    unique = [c for c in candidates if sentence_count[c[2].lower()] == 1]
    queries: list[Query] = []
    slug = slug_of(DOCS_REPO)
    for path, heading, sentence, start, end in _sample(rng, unique, plan.counts["docs"]):
        template = rng.randrange(len(_DOC_TEMPLATES))
        package = path.split("/", 1)[0].removeprefix("debian-")
        text = _DOC_TEMPLATES[template].format(
            heading=heading, package=package, clause=sentence.rstrip(".!?:")
        )
        answer = Answer(slug, path, "", start, end)
        queries.append(Query("", "docs", f"template-{template}", "markdown", text, answer, 0))
    directory = workdir / "repos" / DOCS_REPO
    write_tree(directory, files)
    repo = RepoCopy(
        DOCS_REPO,
        slug,
        "markdown",
        "mixed",
        directory,
        {path: len(text) for path, text in files.items()},
        sections,
    )
    notes = {
        "docs_sets": [f"{s.name}@{s.version}" for s in sources],
        "docs_sections": sections,
        "docs_candidates": len(unique),
    }
    return [repo], queries, notes


def build(plan: Plan, workdir: Path) -> Dataset:
    """Writes the repositories to index under `workdir/repos` and returns the query sets."""
    code_repos, code_queries, code_notes = build_code(plan, workdir, random.Random(plan.seed))
    doc_repos, doc_queries, doc_notes = build_docs(plan, workdir, random.Random(plan.seed + 1))
    queries = _assign_halves(code_queries + doc_queries, plan.seed)
    notes = {**code_notes, **doc_notes}
    if len(doc_queries) < plan.counts["docs"]:
        notes["docs_shortfall"] = (
            f"only {len(doc_queries)} usable markdown sections found offline "
            f"(asked for {plan.counts['docs']})"
        )
    return Dataset(plan, code_repos + doc_repos, queries, notes)

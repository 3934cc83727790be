"""Corpora the harness's package sets do not cover (issue 16), with their query sets.

- `small-files`: many small files with one or two top-level functions each, Python
  (networkx's algorithms) and JavaScript (npm-bundled packages outside the package sets);
  semantic queries are the first sentence of a function's docstring (JavaScript: its
  leading comment), cut from the indexed copy; symbol queries are bare names.
- `nested`: whole files built around classes with many methods, Python (sortedcontainers,
  fsspec, requests, tqdm, filelock) and Java (six Apache Commons Lang classes); semantic
  queries target methods of classes with at least MIN_METHODS methods; symbol queries are
  `Class.method`.
- `languages`: Go (google/uuid, spf13/pflag), Rust (rust-lang/log), Java (nine more Commons
  Lang classes) from the excerpts in corpora/languages.tar.xz, and JavaScript (undici as
  npm bundles it); semantic and symbol queries as above.
- `bare-files` (bare.py): the frozen split's shape (one function a file, no comment or
  docstring left) cut from networkx and the Go excerpts, to tune for that shape on.
- `history`: commit subjects as questions and the functions each commit changed as answers,
  the repository indexed at one base commit (corpora/history-*.json, derived by history.py).

Every repository is its own slug and every query is scoped to its answer's repository, so
the service and the external baselines (baselines.py) rank the same candidates. Fixed seeds;
each set gets a tuning half and a held-out half per (corpus, class), as the package sets do.
"""

from __future__ import annotations

import io
import random
import re
import tarfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from bench.quality import history
from bench.quality.corpus import (
    NPM_ROOT,
    Language,
    PackageSource,
    npm_package,
    python_package,
    read_sources,
    strip_docstrings,
    write_tree,
)
from bench.quality.datasets import Answer, RepoCopy, usable_sentence
from bench.quality.perturb import first_sentence
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.languages import detect_language
from retrieval.indexing.parsing.nodes import CodeNode

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
UnseenClass = Literal["semantic", "symbol", "localisation"]
UNSEEN_CLASSES: tuple[UnseenClass, ...] = ("semantic", "symbol", "localisation")
CORPORA: tuple[str, ...] = ("small-files", "nested", "languages", "history", "bare-files")
SLUG_PREFIX = "local/unseen"
SEED = 20261130
MIN_METHODS = 8
DEFINITIONS = frozenset({"function", "method", "class", "struct", "interface", "enum", "trait"})
CALLABLES = frozenset({"function", "method"})
# Harness package sets (datasets.FULL) stay out, so these sets test other code.
HARNESS_JS = frozenset({"semver", "lru-cache", "minimatch", "glob", "minipass", "diff"})
NESTED_PYTHON = ("sortedcontainers", "fsspec", "requests", "tqdm", "filelock")
NESTED_JAVA = ("BooleanUtils", "ObjectUtils", "Validate", "ClassUtils", "CharUtils", "RegExUtils")
_JAVADOC_TAG = re.compile(r"\{@\w+\s+([^}]*)\}")
_EXT = {"python": ".py", "javascript": ".js"}


@dataclass(frozen=True, slots=True)
class UQuery:
    """A query with one or more answers (any of them found counts)."""

    id: str
    corpus: str
    klass: UnseenClass
    language: str
    text: str
    answers: tuple[Answer, ...]
    half: int

    def matches(
        self, repo: str, path: str, qualified_name: str, start_line: int, end_line: int
    ) -> bool:
        return any(
            a.matches(repo, path, qualified_name, start_line, end_line) for a in self.answers
        )

    @property
    def repo(self) -> str:
        return self.answers[0].repo

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "corpus": self.corpus,
            "class": self.klass,
            "language": self.language,
            "half": self.half,
            "answers": [
                {"repo": a.repo, "path": a.path, "qualified_name": a.qualified_name}
                for a in self.answers
            ],
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A definition of an indexed copy with its raw source (what the baselines rank)."""

    repo: str
    path: str
    qualified_name: str
    kind: str
    start_line: int
    end_line: int
    text: str
    # The doc comment above the definition where it lies outside the definition's lines
    # (every language but Python, whose docstring is in `text`); "" when there is none.
    doc: str = ""

    @property
    def documented_text(self) -> str:
        """The definition as an editor shows it: its doc comment, then its lines."""
        return f"{self.doc}\n{self.text}" if self.doc else self.text


@dataclass
class UnseenSet:
    corpus: str
    repos: list[RepoCopy]
    queries: list[UQuery]
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class _File:
    path: str
    language: str
    nodes: list[CodeNode]


def slug_of(name: str) -> str:
    return f"{SLUG_PREFIX}/{name}"


def doc_sentence(docstring: str | None) -> str | None:
    """The query a docstring gives: its first sentence, javadoc tags unwrapped; None when
    it is not prose a person would type."""
    if not docstring:
        return None
    sentence = first_sentence(_JAVADOC_TAG.sub(r"\1", docstring))
    return sentence if usable_sentence(sentence, 5) else None


def parse_tree(parser: CodeParser, files: dict[str, str]) -> list[_File]:
    out: list[_File] = []
    for path, text in sorted(files.items()):
        language = detect_language(path)
        if language is None:
            continue
        parsed = parser.parse(path, text.encode("utf-8"))
        if parsed is not None:
            out.append(_File(path, language, list(parsed.nodes)))
    return out


def definitions(files: Iterable[_File]) -> list[tuple[_File, CodeNode]]:
    return [(f, n) for f in files for n in f.nodes if n.kind in DEFINITIONS]


def candidates(repo: str, files: dict[str, str], parsed: Sequence[_File]) -> list[Candidate]:
    """Every definition of a copy with the lines it spans (the raw source, as indexed)."""
    out: list[Candidate] = []
    for f in parsed:
        lines = files[f.path].split("\n")
        for node in f.nodes:
            if node.kind in DEFINITIONS:
                text = "\n".join(lines[node.start_line - 1 : node.end_line])
                out.append(
                    Candidate(
                        repo,
                        f.path,
                        node.qualified_name,
                        node.kind,
                        node.start_line,
                        node.end_line,
                        text,
                        "" if f.language == "python" else (node.docstring or ""),
                    )
                )
    return out


def strip_doc(text: str, language: str, nodes: Iterable[CodeNode]) -> tuple[str, set[str]]:
    """Python docstrings become `pass`; every other language's doc comment (the block of
    `//`, `///`, `/*`, `*` lines right above the definition, which is what the parser
    reads as its docstring) is dropped."""
    mode: Language = "python" if language == "python" else "javascript"
    return strip_docstrings(text, mode, nodes)


def assign_halves(queries: Sequence[UQuery], seed: int = SEED) -> list[UQuery]:
    """Alternating halves over a seeded shuffle per (corpus, class); ids numbered per
    (corpus, class) in input order."""
    out: list[UQuery] = []
    groups: dict[tuple[str, str], list[UQuery]] = {}
    for query in queries:
        groups.setdefault((query.corpus, query.klass), []).append(query)
    for (corpus, klass), members in groups.items():
        order = list(range(len(members)))
        random.Random(f"{seed}-{corpus}-{klass}").shuffle(order)
        halves = {index: position % 2 for position, index in enumerate(order)}
        for index, q in enumerate(members):
            out.append(
                UQuery(
                    f"{corpus}-{klass}-{index:04d}",
                    q.corpus,
                    q.klass,
                    q.language,
                    q.text,
                    q.answers,
                    halves[index],
                )
            )
    return out


def _answer(repo: str, path: str, node: CodeNode) -> Answer:
    return Answer(slug_of(repo), path, node.qualified_name, node.start_line, node.end_line)


def _semantic_and_symbol(
    corpus: str,
    repo: str,
    files: dict[str, str],
    parser: CodeParser,
    rng: random.Random,
    *,
    semantic: int,
    symbol: int,
    eligible: Callable[[_File, CodeNode], bool],
    symbol_text: Callable[[CodeNode], str],
) -> tuple[list[UQuery], list[_File], dict[str, int]]:
    """Samples semantic targets among `eligible` definitions with a usable, unique doc
    sentence, cuts their docs from `files` (in place), re-parses, and samples symbol
    queries over names unique in the repository. Returns queries, the final parse, notes."""
    parsed = parse_tree(parser, files)
    sentences: dict[tuple[str, str], str] = {}
    seen: Counter[str] = Counter()
    for f, node in definitions(parsed):
        sentence = doc_sentence(node.docstring)
        if not sentence:
            continue
        # Uniqueness counts every definition: a sentence that also documents an overload
        # (`removeAll#3`) or a definition outside `eligible` has two right answers.
        seen[sentence.lower()] += 1
        if eligible(f, node) and "#" not in node.qualified_name:
            sentences[(f.path, node.qualified_name)] = sentence
    unique = sorted(k for k, s in sentences.items() if seen[s.lower()] == 1)
    targets = set(rng.sample(unique, min(semantic, len(unique))))
    cut: set[tuple[str, str]] = set()
    for f in parsed:
        wanted = [n for n in f.nodes if (f.path, n.qualified_name) in targets]
        if wanted:
            text, names = strip_doc(files[f.path], f.language, wanted)
            files[f.path] = text
            cut.update((f.path, name) for name in names)
    final = parse_tree(parser, files)
    by_key = {(f.path, n.qualified_name): (f, n) for f, n in definitions(final)}
    queries: list[UQuery] = []
    dropped = 0
    for key in sorted(targets):
        hit = by_key.get(key)
        if key not in cut or hit is None or (hit[1].docstring or "").strip():
            dropped += 1  # the doc could not be cut cleanly: not a fair test
            continue
        f, node = hit
        answer = _answer(repo, f.path, node)
        queries.append(UQuery("", corpus, "semantic", f.language, sentences[key], (answer,), 0))
    texts = Counter(symbol_text(n) for _, n in definitions(final))
    named = [
        (f, n)
        for f, n in definitions(final)
        if eligible(f, n)
        and "#" not in n.qualified_name
        and len(n.name) >= 3
        and not n.name.startswith("__")
        and texts[symbol_text(n)] == 1
    ]
    for f, node in rng.sample(named, min(symbol, len(named))):
        answer = _answer(repo, f.path, node)
        queries.append(UQuery("", corpus, "symbol", f.language, symbol_text(node), (answer,), 0))
    notes = {
        "semantic_candidates": len(unique),
        "semantic_dropped_uncuttable": dropped,
        "symbol_candidates": len(named),
    }
    return queries, final, notes


def _repo(name: str, language: str, version: str, workdir: Path, files: dict[str, str]) -> RepoCopy:
    directory = workdir / "repos" / name
    write_tree(directory, files)
    return RepoCopy(
        name,
        slug_of(name),
        cast(Language, language),
        version,
        directory,
        {path: len(text) for path, text in files.items()},
    )


def _top_level(f: _File, node: CodeNode) -> bool:
    module = next((n.qualified_name for n in f.nodes if n.kind == "module"), None)
    return node.kind == "function" and node.parent == module


def _small_file_texts(
    sources: Sequence[PackageSource],
    parser: CodeParser,
    rng: random.Random,
    count: int,
) -> dict[str, str]:
    """`count` small files cut from `sources`: each holds one top-level function with its
    leading comment (and decorators), or two functions that were neighbours."""
    pool: list[tuple[str, list[str], list[CodeNode]]] = []
    for source in sources:
        texts = read_sources(source)
        for f in parse_tree(parser, texts):
            functions = [n for n in f.nodes if _top_level(f, n) and n.end_line - n.start_line >= 2]
            if functions:
                pool.append((f.path, texts[f.path].split("\n"), functions))
    singles = [(path, lines, i, fns) for path, lines, fns in pool for i in range(len(fns))]
    rng.shuffle(singles)
    out: dict[str, str] = {}
    used: set[tuple[str, str]] = set()
    for path, lines, i, functions in singles:
        if len(out) >= count:
            break
        chosen = [functions[i]]
        if i + 1 < len(functions) and rng.random() < 0.5:
            chosen.append(functions[i + 1])
        if any((path, n.qualified_name) in used for n in chosen):
            continue
        used.update((path, n.qualified_name) for n in chosen)
        parts = []
        for node in chosen:
            start = node.start_line
            # Decorators (Python) and the leading comment block (JavaScript) come along.
            while start > 1 and lines[start - 2].lstrip().startswith(("@", "//", "/*", "*")):
                start -= 1
            parts.append("\n".join(lines[start - 1 : node.end_line]))
        stem, ext = path.rsplit(".", 1)
        target = f"{stem}/{chosen[0].name}.{ext}"
        if target in out:
            continue
        out[target] = "\n\n\n".join(parts) + "\n"
    return out


def build_small_files(workdir: Path, per_language: int, files_per_language: int) -> UnseenSet:
    parser = CodeParser()
    rng = random.Random(f"{SEED}-small-files")
    queries: list[UQuery] = []
    repos: list[RepoCopy] = []
    notes: dict[str, Any] = {}
    python = python_package("networkx")
    js_names = sorted(
        p.name
        for p in (NPM_ROOT / "node_modules").iterdir()
        if p.is_dir() and not p.name.startswith("@") and p.name not in HARNESS_JS | {"undici"}
    )
    scoped = sorted(
        f"{scope.name}/{p.name}"
        for scope in (NPM_ROOT / "node_modules").glob("@*")
        for p in scope.iterdir()
        if p.is_dir()
    )
    javascript = [s for s in (npm_package(n) for n in js_names + scoped) if s is not None]
    plans: list[tuple[str, list[PackageSource]]] = [
        ("python", [python] if python else []),
        ("javascript", javascript),
    ]
    for language, found_sources in plans:
        if not found_sources:
            notes[f"{language}_missing"] = True
            continue
        sources = found_sources
        if language == "python":  # networkx's algorithms: top-level functions, documented
            sources = [
                PackageSource(
                    s.name,
                    s.language,
                    s.root,
                    s.version,
                    tuple(p for p in s.files if p.startswith("algorithms/")),
                )
                for s in sources
            ]
        files = _small_file_texts(sources, parser, rng, files_per_language)
        name = f"small-files-{language}"
        found, _, set_notes = _semantic_and_symbol(
            "small-files",
            name,
            files,
            parser,
            rng,
            semantic=per_language,
            symbol=per_language // 4,
            eligible=lambda f, n: n.kind == "function",
            symbol_text=lambda n: n.name,
        )
        queries += found
        versions = ",".join(sorted({f"{s.name}@{s.version}" for s in sources}))
        repos.append(_repo(name, language, versions, workdir, files))
        notes[name] = {**set_notes, "files": len(files)}
    return UnseenSet("small-files", repos, queries, notes)


def _members(parsed: Iterable[_File]) -> Counter[str]:
    return Counter(n.parent for f in parsed for n in f.nodes if n.kind == "method" and n.parent)


def _in_big_class(members: Counter[str]) -> Callable[[_File, CodeNode], bool]:
    def eligible(f: _File, node: CodeNode) -> bool:
        del f
        return node.kind == "method" and members.get(node.parent or "", 0) >= MIN_METHODS

    return eligible


def _method_symbol(node: CodeNode) -> str:
    parts = node.qualified_name.split(".")
    return ".".join(parts[-2:])


def _excerpts(prefix: str) -> dict[str, str]:
    """Files of corpora/languages.tar.xz under `prefix`/, by their path in the archive."""
    out: dict[str, str] = {}
    with tarfile.open(CORPORA_DIR / "languages.tar.xz", "r:xz") as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("./")
            if member.isfile() and name.startswith(prefix + "/"):
                handle = tar.extractfile(member)
                if handle is not None:
                    out[name] = handle.read().decode("utf-8", errors="replace")
    return out


def build_nested(workdir: Path, per_language: int) -> UnseenSet:
    parser = CodeParser()
    rng = random.Random(f"{SEED}-nested")
    queries: list[UQuery] = []
    repos: list[RepoCopy] = []
    notes: dict[str, Any] = {}
    py_files: dict[str, str] = {}
    versions = []
    for name in NESTED_PYTHON:
        source = python_package(name)
        if source is not None:
            py_files.update(read_sources(source))
            versions.append(f"{name}@{source.version}")
    java = {
        path: text
        for path, text in _excerpts("java-commons-lang").items()
        if path.endswith(".java") and path.rsplit("/", 1)[-1][:-5] in NESTED_JAVA
    }
    for language, files, version in (
        ("python", py_files, ",".join(versions)),
        ("java", java, "commons-lang@d15939ef"),
    ):
        if not files:
            notes[f"{language}_missing"] = True
            continue
        members = _members(parse_tree(parser, files))
        name = f"nested-{language}"
        found, final, set_notes = _semantic_and_symbol(
            "nested",
            name,
            files,
            parser,
            rng,
            semantic=per_language,
            symbol=per_language // 4,
            eligible=_in_big_class(members),
            symbol_text=_method_symbol,
        )
        queries += found
        repos.append(_repo(name, language, version, workdir, files))
        big = [c for c, k in _members(final).items() if k >= MIN_METHODS]
        notes[name] = {**set_notes, "classes_with_many_methods": len(big)}
    return UnseenSet("nested", repos, queries, notes)


def build_languages(workdir: Path, per_language: int) -> UnseenSet:
    parser = CodeParser()
    rng = random.Random(f"{SEED}-languages")
    queries: list[UQuery] = []
    repos: list[RepoCopy] = []
    notes: dict[str, Any] = {}
    go = {**_excerpts("go-uuid"), **_excerpts("go-pflag")}
    rust = _excerpts("rust-log")
    java = {
        path: text
        for path, text in _excerpts("java-commons-lang").items()
        if path.endswith(".java") and path.rsplit("/", 1)[-1][:-5] not in NESTED_JAVA
    }
    undici = npm_package("undici")
    javascript = read_sources(undici) if undici else {}
    plans = (
        ("go", go, "google/uuid@2d3c2a9c,spf13/pflag@5fdac2d1"),
        ("rust", rust, "rust-lang/log@037d7a58"),
        ("java", java, "commons-lang@d15939ef"),
        ("javascript", javascript, f"undici@{undici.version if undici else '-'}"),
    )
    for language, tree, version in plans:
        files = {p: t for p, t in tree.items() if detect_language(p) is not None}
        if not files:
            notes[f"{language}_missing"] = True
            continue
        name = f"languages-{language}"
        found, _, set_notes = _semantic_and_symbol(
            "languages",
            name,
            files,
            parser,
            rng,
            semantic=per_language,
            symbol=per_language // 3,
            eligible=lambda f, n: True,
            symbol_text=lambda n: n.name,
        )
        queries += found
        repos.append(_repo(name, language, version, workdir, files))
        notes[name] = set_notes
    return UnseenSet("languages", repos, queries, notes)


def snapshot_files(archive: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                out[member.name] = handle.read().decode("utf-8", errors="replace")
    return out


def build_history(
    workdir: Path, names: Sequence[str] = ("history-packaging", "history-log")
) -> UnseenSet:
    parser = CodeParser()
    queries: list[UQuery] = []
    repos: list[RepoCopy] = []
    notes: dict[str, Any] = {}
    for name in names:
        data = history.load(name)
        archive = snapshot_files(CORPORA_DIR / data["snapshot"])
        files = {p: t for p, t in archive.items() if detect_language(p) is not None}
        spans = {
            (f.path, n.qualified_name): (n.start_line, n.end_line)
            for f, n in definitions(parse_tree(parser, files))
        }
        language = ""
        kept = 0
        for item in data["queries"]:
            answers = []
            for a in item["answers"]:
                start, end = spans.get((a["path"], a["qualified_name"]), (0, 0))
                answers.append(Answer(slug_of(name), a["path"], a["qualified_name"], start, end))
                language = detect_language(a["path"]) or language
            if answers:
                kept += 1
                queries.append(
                    UQuery(
                        "", "history", "localisation", language, item["subject"], tuple(answers), 0
                    )
                )
        repos.append(_repo(name, language, f"{data['origin']}@{data['base'][:10]}", workdir, files))
        notes[name] = {"questions": kept, "base": data["base"], "origin": data["origin"]}
    return UnseenSet("history", repos, queries, notes)


@dataclass(frozen=True)
class Sizes:
    """Queries per language per class, and how many small files per language."""

    semantic: int = 150
    small_files: int = 600
    bare_files: int = 400


SIZES = {"full": Sizes(), "quick": Sizes(semantic=60, small_files=200, bare_files=200)}


def build(corpora: Sequence[str], workdir: Path, sizes: Sizes = Sizes()) -> list[UnseenSet]:
    sets: list[UnseenSet] = []
    for corpus in corpora:
        if corpus == "small-files":
            sets.append(build_small_files(workdir, sizes.semantic, sizes.small_files))
        elif corpus == "nested":
            sets.append(build_nested(workdir, sizes.semantic))
        elif corpus == "languages":
            sets.append(build_languages(workdir, sizes.semantic))
        elif corpus == "history":
            sets.append(build_history(workdir))
        elif corpus == "bare-files":
            from bench.quality import bare  # it cuts with frozen_build, which imports this

            sets.append(bare.build(workdir, sizes.semantic, sizes.bare_files))
        else:
            raise ValueError(f"unknown corpus {corpus!r}")
    queries = assign_halves([q for s in sets for q in s.queries])
    by_corpus: dict[str, list[UQuery]] = {}
    for q in queries:
        by_corpus.setdefault(q.corpus, []).append(q)
    for s in sets:
        s.queries = by_corpus.get(s.corpus, [])
    return sets


def repo_candidates(repo: RepoCopy) -> list[Candidate]:
    """The definitions of a written copy, read back from disk (what was indexed)."""
    files = {
        p.relative_to(repo.directory).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(repo.directory.rglob("*"))
        if p.is_file()
    }
    return candidates(repo.slug, files, parse_tree(CodeParser(), files))


def archive_bytes(files: dict[str, str]) -> bytes:
    """A tar.xz of `files` (for tests and for re-packing excerpts)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()

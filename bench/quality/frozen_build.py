"""Builds the frozen evaluation split (bench/quality/frozen/) from unpacked packages and
git clones. Run once; what it writes is committed and never rebuilt by a run.

    python -m bench.quality.frozen_build --packages DIR --git NAME=GIT_DIR [...]
                                         [--out bench/quality/frozen]

DIR holds the packages the split is cut from, unpacked as bench/quality/frozen/README.md
says (PyPI sdists, Debian source packages of Rust crates and Go modules); each `--git`
names a clone with full history of one localisation repository (`history-anyio`,
`history-structlog`), read with git, never copied.

- `small-files-{python,rust,go}`: FILES files, each holding one short top-level function
  cut from the packages of SOURCES, every comment and docstring removed. Semantic
  questions are the first sentence of a function's doc comment or docstring as the
  package wrote it, without a leading name of the function ("ToBool casts ..." asks
  "Casts ..."); symbol questions are bare names unique in the repository.
- `history-*`: commit subjects after a release tag as questions and the functions each
  commit changed as answers (bench/quality/history.py's derivation), the release's own
  sdist from PyPI (checked equal, file by file, to the tag) as the indexed snapshot.

Each repository is one tar.xz (its licence files inside), the questions one split.json,
and MANIFEST.sha256 their digests. Fixed seeds: the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import re
import subprocess
import tarfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality import history
from bench.quality.corpus import strip_docstrings
from bench.quality.datasets import usable_sentence
from bench.quality.frozen import FROZEN_DIR, MANIFEST, SPLIT
from bench.quality.unseen import doc_sentence
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.languages import Grammars, detect_language
from retrieval.indexing.parsing.nodes import CodeNode

SPLIT_NAME = "frozen-1"
SEED = 20261203
FILES = 400  # small files per language
SEMANTIC = 150  # semantic questions per language
SYMBOL = 50  # symbol questions per language
MIN_LINES, MAX_LINES = 3, 60  # a short function, as found and as indexed
COMMENT_TYPES = frozenset({"comment", "line_comment", "block_comment"})
_EXT = {"python": ".py", "rust": ".rs", "go": ".go"}
_SKIP_PART = re.compile(r"^(tests?|testing|benches|benchmarks?|examples?|fuzz|build\.rs)$")
_GO_PACKAGE = re.compile(r"^package\s+(\w+)", re.MULTILINE)
_OVERLOAD = re.compile(r"@(\w+\.)*overload\b")
_ABOVE = ("@", "#[", "//", "#", "/*", "*")  # decorators, attributes, comments above a def


@dataclass(frozen=True)
class Source:
    """One package the small files are cut from, as unpacked under --packages."""

    name: str  # the top directory of its files in the copy
    language: str
    package: str  # where it comes from: the registry and the exact version
    origin: str  # the upstream project
    licence: str  # SPDX
    root: str  # its unpacked directory, relative to --packages
    code: str  # the directory under root the files are cut from
    licence_files: tuple[str, ...]  # relative to --packages


_CARGO = "debian/usr/share/cargo/registry"
_GOCODE = "debian/usr/share/gocode/src/github.com"
_DOC = "debian/usr/share/doc"


def _crate(name: str, version: str, *, deb: str, origin: str, licence: str, files: str) -> Source:
    root = f"{_CARGO}/{name}-{version}"
    return Source(
        name,
        "rust",
        f"Debian bookworm librust-{name}-dev {deb} (crate {name} {version})",
        origin,
        licence,
        root,
        "src",
        tuple(f"{root}/{f}" for f in files.split()),
    )


def _gomod(owner: str, name: str, deb: str, version: str, licence: str = "MIT") -> Source:
    return Source(
        name,
        "go",
        f"Debian bookworm {deb} {version}",
        f"https://github.com/{owner}/{name}",
        licence,
        f"{_GOCODE}/{owner}/{name}",
        ".",
        (f"{_DOC}/{deb}/copyright",),
    )


SOURCES: tuple[Source, ...] = (
    Source(
        "more_itertools",
        "python",
        "PyPI more-itertools 11.2.1 (sdist)",
        "https://github.com/more-itertools/more-itertools",
        "MIT",
        "more_itertools-11.2.1",
        "more_itertools",
        ("more_itertools-11.2.1/LICENSE",),
    ),
    Source(
        "toolz",
        "python",
        "PyPI toolz 1.2.0 (sdist)",
        "https://github.com/pytoolz/toolz",
        "BSD-3-Clause",
        "toolz-1.2.0",
        "toolz",
        ("toolz-1.2.0/LICENSE.txt",),
    ),
    Source(
        "boltons",
        "python",
        "PyPI boltons 26.2.0 (sdist)",
        "https://github.com/mahmoud/boltons",
        "BSD-3-Clause",
        "boltons-26.2.0",
        "boltons",
        ("boltons-26.2.0/LICENSE",),
    ),
    Source(
        "pydash",
        "python",
        "PyPI pydash 8.1.0 (sdist)",
        "https://github.com/dgilland/pydash",
        "MIT",
        "pydash-8.1.0",
        "src/pydash",
        ("pydash-8.1.0/LICENSE.rst",),
    ),
    _crate(
        "nom",
        "7.1.1",
        deb="7.1.1-1",
        origin="https://github.com/rust-bakery/nom",
        licence="MIT",
        files="LICENSE",
    ),
    _crate(
        "itertools",
        "0.10.3",
        deb="0.10.3-1",
        origin="https://github.com/rust-itertools/itertools",
        licence="MIT OR Apache-2.0",
        files="LICENSE-MIT LICENSE-APACHE",
    ),
    _crate(
        "bstr",
        "0.2.17",
        deb="0.2.17-1",
        origin="https://github.com/BurntSushi/bstr",
        licence="MIT OR Apache-2.0",
        files="LICENSE-MIT LICENSE-APACHE COPYING",
    ),
    _crate(
        "strsim",
        "0.10.0",
        deb="0.10.0-1",
        origin="https://github.com/rapidfuzz/strsim-rs",
        licence="MIT",
        files="LICENSE",
    ),
    _crate(
        "textwrap",
        "0.16.0",
        deb="0.16.0-2",
        origin="https://github.com/mgeisler/textwrap",
        licence="MIT",
        files="LICENSE",
    ),
    _crate(
        "num-integer",
        "0.1.44",
        deb="0.1.44-1",
        origin="https://github.com/rust-num/num-integer",
        licence="MIT OR Apache-2.0",
        files="LICENSE-MIT LICENSE-APACHE",
    ),
    _gomod("thoas", "go-funk", "golang-github-thoas-go-funk-dev", "0.9.3-1"),
    _gomod("montanaflynn", "stats", "golang-github-montanaflynn-stats-dev", "0.6.4-2"),
    _gomod("spf13", "cast", "golang-github-spf13-cast-dev", "1.5.0-2"),
    _gomod("huandu", "xstrings", "golang-github-huandu-xstrings-dev", "1.3.3-1"),
    _gomod("dustin", "go-humanize", "golang-github-dustin-go-humanize-dev", "1.0.0-3"),
    _gomod("Masterminds", "sprig", "golang-github-masterminds-sprig-dev", "3.2.3-5"),
)


@dataclass(frozen=True)
class HistorySource:
    """A localisation repository: questions from its history after `tag`, the snapshot
    from the release's sdist (`root` under --packages)."""

    name: str
    package: str
    origin: str
    licence: str
    tag: str
    root: str
    snapshot_dirs: tuple[str, ...] = ("src/", "tests/")
    licence_files: tuple[str, ...] = ("LICENSE",)


HISTORY: tuple[HistorySource, ...] = (
    HistorySource(
        "history-anyio",
        "PyPI anyio 4.0.0 (sdist)",
        "https://github.com/agronholm/anyio",
        "MIT",
        "4.0.0",
        "anyio-4.0.0",
    ),
    HistorySource(
        "history-structlog",
        "PyPI structlog 21.1.0 (sdist)",
        "https://github.com/hynek/structlog",
        "MIT OR Apache-2.0",
        "21.1.0",
        "structlog-21.1.0",
        licence_files=("LICENSE", "LICENSE.mit", "LICENSE.apache2"),
    ),
)


# ------------------------------------------------------------------ pure text operations


def remove_comments(text: str, language: str, grammars: Grammars | None = None) -> str:
    """`text` without any comment the language's grammar finds (doc comments included); a
    line left blank by a removal is dropped, one that keeps code loses trailing spaces."""
    data = text.encode("utf-8")
    tree = (grammars or Grammars()).parser(language).parse(data)
    cuts: dict[int, list[tuple[int, int]]] = {}  # row -> byte ranges of that row to cut
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in COMMENT_TYPES:
            (r1, c1), (r2, c2) = node.start_point, node.end_point
            for row in range(r1, r2 + 1):
                start = c1 if row == r1 else 0
                end = c2 if row == r2 else 1 << 30
                cuts.setdefault(row, []).append((start, end))
            continue
        stack.extend(node.children)
    if not cuts:
        return text
    out: list[str] = []
    for row, line in enumerate(data.split(b"\n")):
        ranges = cuts.get(row)
        if not ranges:
            out.append(line.decode("utf-8"))
            continue
        kept = bytearray()
        last = 0
        for start, end in sorted(ranges):
            kept += line[last:start]
            last = max(last, end)
        kept += line[last:] if last < len(line) else b""
        rest = kept.decode("utf-8").rstrip()
        if rest.strip():
            out.append(rest)
    return "\n".join(out)


def strip_all(text: str, language: str, nodes: Sequence[CodeNode], grammars: Grammars) -> str:
    """Docstrings of every definition in `nodes` (Python; each becomes `pass`), then every
    comment removed."""
    if language == "python":
        text, _ = strip_docstrings(text, "python", nodes)
    return remove_comments(text, language, grammars)


def question_text(sentence: str, name: str) -> str | None:
    """The question a doc sentence gives: without a leading name of the function it
    documents (Go's convention, "ToBool casts ..."), capitalised; None when what remains is
    not a question a person would type."""
    first, _, rest = sentence.partition(" ")
    if first.strip("`*'\".,:;") in (name, f"{name}()") and rest:
        sentence = rest[0].upper() + rest[1:]
    return sentence if usable_sentence(sentence, 4) else None


def is_code_path(rel: str) -> bool:
    """Not a test, benchmark, example or build script."""
    parts = rel.split("/")
    if any(_SKIP_PART.match(p) for p in parts):
        return False
    name = parts[-1]
    return not (name.endswith("_test.go") or name.startswith("test_") or name == "conftest.py")


def snippet(lines: Sequence[str], node: CodeNode) -> str:
    """The function's lines with the decorators, attributes and comments right above it."""
    start = node.start_line
    while start > 1 and lines[start - 2].lstrip().startswith(_ABOVE):
        start -= 1
    return "\n".join(lines[start - 1 : node.end_line])


def go_package(text: str) -> str:
    match = _GO_PACKAGE.search(text)
    return match.group(1) if match else "main"


# ------------------------------------------------------------------------- small files


@dataclass(frozen=True)
class Cut:
    """One function cut into a file of its own."""

    path: str  # in the copy
    source: str
    name: str
    original: str  # as the package wrote it (for the question)
    stripped: str  # as indexed


def _top_level(nodes: Sequence[CodeNode]) -> list[CodeNode]:
    module = next((n.qualified_name for n in nodes if n.kind == "module"), None)
    return [
        n
        for n in nodes
        if n.kind == "function"
        and n.parent == module
        and MIN_LINES <= n.end_line - n.start_line + 1 <= MAX_LINES
    ]


def cuts_of(
    source: Source, files: dict[str, str], parser: CodeParser, grammars: Grammars
) -> list[Cut]:
    """Every short top-level function of a package's code files, each as a file of its
    own under `<source>/<module path>/<name><ext>`, with and without its comments."""
    out: list[Cut] = []
    taken: set[str] = set()
    ext = _EXT[source.language]
    for rel, text in sorted(files.items()):
        if detect_language(rel) != source.language or not is_code_path(rel):
            continue
        parsed = parser.parse(rel, text.encode("utf-8"))
        if parsed is None:
            continue
        lines = text.split("\n")
        header = f"package {go_package(text)}\n\n" if source.language == "go" else ""
        for node in _top_level(list(parsed.nodes)):
            stem = rel[: -len(ext)] if rel.endswith(ext) else rel
            path = f"{source.name}/{stem}/{node.name}{ext}"
            text_of = snippet(lines, node)
            if path in taken or _OVERLOAD.search(text_of.split("def ", 1)[0]):
                continue  # a typing stub, or a second definition of the name in its file
            taken.add(path)
            original = header + text_of + "\n"
            again = parser.parse(path, original.encode("utf-8"))
            nodes = list(again.nodes) if again is not None else []
            stripped = strip_all(original, source.language, nodes, grammars).rstrip() + "\n"
            body = stripped.count("\n") - header.count("\n")
            if body < MIN_LINES or _documented(path, stripped, parser):
                continue  # nothing but its documentation, or documentation that stays
            out.append(Cut(path, source.name, node.name, original, stripped))
    return out


def _documented(path: str, text: str, parser: CodeParser) -> bool:
    """Whether any definition of `text` still has a docstring (a conditional definition,
    indented under an `if`, is not a module on its own and keeps it)."""
    parsed = parser.parse(path, text.encode("utf-8"))
    return parsed is None or any((n.docstring or "").strip() for n in parsed.nodes)


def read_tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _functions(path: str, text: str, parser: CodeParser) -> list[CodeNode]:
    parsed = parser.parse(path, text.encode("utf-8"))
    return [n for n in (parsed.nodes if parsed else ()) if n.kind == "function"]


def small_files(
    language: str,
    cuts: Sequence[Cut],
    parser: CodeParser,
    grammars: Grammars,
    *,
    files: int = FILES,
    semantic: int = SEMANTIC,
    symbol: int = SYMBOL,
    seed: int = SEED,
) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, Any]]:
    """The indexed tree, the questions and notes of one language's small-files repository."""
    rng = random.Random(f"{seed}-small-files-{language}")
    pool = sorted({c.path: c for c in cuts}.values(), key=lambda c: c.path)
    rng.shuffle(pool)
    chosen = sorted(pool[:files], key=lambda c: c.path)
    tree = {c.path: c.stripped for c in chosen}
    # Questions: the original doc sentence; answers: the function as the stripped copy
    # parses (one per file, no doc left).
    texts: dict[str, str] = {}
    answers: dict[str, CodeNode] = {}
    for cut in chosen:
        before = _functions(cut.path, cut.original, parser)
        after = [n for n in _functions(cut.path, cut.stripped, parser) if n.name == cut.name]
        if len(after) != 1 or (after[0].docstring or "").strip():
            continue
        sentence = doc_sentence(next((n.docstring for n in before if n.name == cut.name), None))
        text = question_text(sentence, cut.name) if sentence else None
        if text:
            texts[cut.path] = text
            answers[cut.path] = after[0]
    seen = Counter(t.lower() for t in texts.values())
    unique = sorted(p for p, t in texts.items() if seen[t.lower()] == 1)
    questions: list[dict[str, Any]] = []
    for i, path in enumerate(sorted(rng.sample(unique, min(semantic, len(unique))))):
        node = answers[path]
        questions.append(
            _question(
                f"small-files-{language}", "semantic", i, text=texts[path], path=path, node=node
            )
        )
    # Symbol questions: any function's name (documented or not) unique in the repository.
    defined = [(p, n) for p, text in sorted(tree.items()) for n in _functions(p, text, parser)]
    names = Counter(n.name for _, n in defined)
    named = [
        (p, n)
        for p, n in defined
        if names[n.name] == 1 and len(n.name) >= 3 and not n.name.startswith("__")
    ]
    picked = sorted(rng.sample(named, min(symbol, len(named))), key=lambda item: item[0])
    for i, (path, node) in enumerate(picked):
        questions.append(
            _question(f"small-files-{language}", "symbol", i, text=node.name, path=path, node=node)
        )
    notes = {
        "functions_found": len(pool),
        "files": len(tree),
        "documented": len(texts),
        "semantic_candidates": len(unique),
        "symbol_candidates": len(named),
    }
    return tree, questions, notes


def _question(
    repo: str, klass: str, i: int, *, text: str, path: str, node: CodeNode
) -> dict[str, Any]:
    return {
        "id": f"{repo}-{klass}-{i:04d}",
        "repo": repo,
        "class": klass,
        "text": text,
        "answers": [{"path": path, "qualified_name": node.qualified_name}],
    }


# ---------------------------------------------------------------------------- history


def _git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True, timeout=120
    ).stdout


def history_set(
    spec: HistorySource, git_dir: Path, packages: Path
) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, Any]]:
    """Questions from the clone's history after the tag; the snapshot from the sdist,
    every file of it under snapshot_dirs checked equal to the tag's."""
    base = _git(git_dir, "rev-parse", f"{spec.tag}^{{commit}}").decode().strip()
    head = _git(git_dir, "rev-parse", "HEAD").decode().strip()
    root = packages / spec.root
    tree: dict[str, str] = {}
    for directory in spec.snapshot_dirs:
        for path in sorted((root / directory).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            data = path.read_bytes()
            if _git(git_dir, "show", f"{base}:{rel}") != data:
                raise SystemExit(f"{spec.name}: {rel} in the sdist differs from {spec.tag}")
            tree[rel] = data.decode("utf-8")
    listed = [
        n
        for n in _git(git_dir, "ls-tree", "-r", "--name-only", base, "--", *spec.snapshot_dirs)
        .decode()
        .split("\n")
        if n.endswith(".py")
    ]
    if sorted(listed) != sorted(tree):
        raise SystemExit(f"{spec.name}: the sdist's files are not the tag's {spec.snapshot_dirs}")
    commits = history.derive(git_dir, base, ("src/",), (".py",))
    questions = [
        {
            "id": f"{spec.name}-localisation-{i:04d}",
            "repo": spec.name,
            "class": "localisation",
            "text": c.subject,
            "commit": c.sha,
            "answers": [{"path": p, "qualified_name": q} for p, q in c.answers],
        }
        for i, c in enumerate(commits)
    ]
    notes = {"base": base, "head": head, "tag": spec.tag, "files": len(tree)}
    return tree, questions, notes


# ----------------------------------------------------------------------------- writing


def archive(files: dict[str, str], extra: dict[str, bytes]) -> bytes:
    """A reproducible tar.xz: sorted names, mtime 0, owner 0."""
    buffer = io.BytesIO()
    entries = {name: text.encode("utf-8") for name, text in files.items()} | extra
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name in sorted(entries):
            data = entries[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_text(directory: Path, names: Iterable[str]) -> str:
    """`sha256sum` format: what `sha256sum -c MANIFEST.sha256` checks."""
    return "".join(f"{sha256((directory / n).read_bytes())}  {n}\n" for n in sorted(names))


def _licences(packages: Path, paths: Sequence[str], directory: str) -> dict[str, bytes]:
    """Licence files by their name in an archive, under `directory` ("" for the top)."""
    where = f"{directory}/" if directory else ""
    return {f"{where}{Path(p).name}": (packages / p).read_bytes() for p in paths}


def build(packages: Path, git_dirs: dict[str, Path], out: Path) -> dict[str, Any]:
    parser = CodeParser()
    grammars = Grammars()
    repositories: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    out.mkdir(parents=True, exist_ok=True)
    for language in ("python", "rust", "go"):
        sources = [s for s in SOURCES if s.language == language]
        cuts: list[Cut] = []
        licences: dict[str, bytes] = {}
        for source in sources:
            files = read_tree(packages / source.root / source.code)
            cuts += cuts_of(source, files, parser, grammars)
            licences |= _licences(packages, source.licence_files, f"LICENSES/{source.name}")
        tree, found, notes = small_files(language, cuts, parser, grammars)
        name = f"small-files-{language}"
        (out / f"{name}.tar.xz").write_bytes(archive(tree, licences))
        questions += found
        repositories.append(
            {
                "name": name,
                "corpus": "small-files",
                "language": language,
                "archive": f"{name}.tar.xz",
                "sources": [_source_record(s) for s in sources],
                "notes": notes,
            }
        )
        print(f"{name}: {notes}", flush=True)
    for spec in HISTORY:
        tree, found, notes = history_set(spec, git_dirs[spec.name], packages)
        licences = _licences(packages, [f"{spec.root}/{f}" for f in spec.licence_files], "")
        (out / f"{spec.name}.tar.xz").write_bytes(archive(tree, licences))
        questions += found
        repositories.append(
            {
                "name": spec.name,
                "corpus": "history",
                "language": "python",
                "archive": f"{spec.name}.tar.xz",
                "sources": [
                    {
                        "name": spec.name.removeprefix("history-"),
                        "package": spec.package,
                        "origin": spec.origin,
                        "licence": spec.licence,
                    }
                ],
                "notes": {**notes, "questions": len(found)},
            }
        )
        print(f"{spec.name}: {len(found)} questions, {notes}", flush=True)
    split = {
        "split": SPLIT_NAME,
        "seed": SEED,
        "note": "a test set: never tuned on, never split into halves",
        "repositories": repositories,
        "questions": questions,
    }
    (out / SPLIT).write_text(json.dumps(split, indent=1, ensure_ascii=False) + "\n")
    names = [SPLIT, *(r["archive"] for r in repositories)]
    (out / MANIFEST).write_text(manifest_text(out, names))
    return split


def _source_record(source: Source) -> dict[str, str]:
    return {
        "name": source.name,
        "package": source.package,
        "origin": source.origin,
        "licence": source.licence,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--packages", type=Path, required=True, help="the unpacked packages")
    parser.add_argument(
        "--git", action="append", default=[], metavar="NAME=GIT_DIR", help="a history clone"
    )
    parser.add_argument("--out", type=Path, default=FROZEN_DIR)
    args = parser.parse_args()
    git_dirs = {k: Path(v) for k, _, v in (item.partition("=") for item in args.git)}
    missing = [h.name for h in HISTORY if h.name not in git_dirs]
    if missing:
        parser.error(f"--git needed for {', '.join(missing)}")
    split = build(args.packages, git_dirs, args.out)
    print(f"{len(split['questions'])} questions over {len(split['repositories'])} repositories")


if __name__ == "__main__":
    main()

"""Where the evaluation's code and prose come from, and how it is copied for indexing.

Everything is read from what this machine already has, offline: Python packages installed
in the project's environment, the JavaScript that npm bundles under /usr/lib/node_modules,
and markdown from npm's own documentation, those packages' READMEs and /usr/share/doc.
Nothing third-party is stored in the repository; each run copies the sources into a
temporary directory (the copy is what gets indexed, so docstrings can be stripped there).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from retrieval.indexing.parsing.nodes import CodeNode
from retrieval.indexing.sources import VENDORED_DIRS

Language = Literal["python", "javascript", "markdown"]

NPM_ROOT = Path("/usr/lib/node_modules/npm")
DEBIAN_DOCS = Path("/usr/share/doc")
# Prose that is the same in every package says nothing about which package it is in.
_BOILERPLATE_DOCS = re.compile(
    r"^(changelog|changes|history|license|licence|code_of_conduct|security|contributing|"
    r"authors|funding)",
    re.IGNORECASE,
)
_SKIP_DIRS = frozenset({"test", "tests", "testing", "esm", "__pycache__", "examples", "benchmarks"})
_JS_COMMENT = re.compile(r"^\s*(//|/\*|\*)")


@dataclass(frozen=True, slots=True)
class PackageSource:
    """One package (or documentation set) as found on this machine."""

    name: str  # also the repository name and the top directory of the copy
    language: Language
    root: Path  # the directory the files are read from
    version: str
    files: tuple[str, ...]  # paths relative to root, sorted


def _listed(root: Path, suffixes: Sequence[str], skip_name: re.Pattern[str] | None) -> list[str]:
    found: list[str] = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if not path.is_file() or not path.name.endswith(tuple(suffixes)):
            continue
        if any(part in _SKIP_DIRS or part == "node_modules" for part in rel.parts[:-1]):
            continue
        if path.name.endswith((".min.js", ".d.ts")):
            continue
        if skip_name is not None and skip_name.match(path.name):
            continue
        found.append(rel.as_posix())
    return sorted(found)


def python_package(name: str) -> PackageSource | None:
    """An installed Python package's own modules (tests excluded), or None if absent."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        distribution = importlib.metadata.packages_distributions().get(name, [name])[0]
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    files = _listed(root, (".py",), None)
    return PackageSource(name, "python", root, version, tuple(files)) if files else None


def npm_package(name: str, npm_root: Path = NPM_ROOT) -> PackageSource | None:
    """A package npm bundles (CommonJS build only: the ESM build is the same code twice)."""
    root = npm_root / "node_modules" / name
    manifest = root / "package.json"
    if not manifest.is_file():
        return None
    version = str(json.loads(manifest.read_text()).get("version", "unknown"))
    files = _listed(root, (".js",), None)
    return PackageSource(name, "javascript", root, version, tuple(files)) if files else None


def _doc_name(label: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", label.lower()).strip("-")


def markdown_sources(npm_root: Path = NPM_ROOT, debian: Path = DEBIAN_DOCS) -> list[PackageSource]:
    """Markdown sets: npm's documentation, each npm-bundled package's markdown, and the
    uncompressed markdown under /usr/share/doc; boilerplate files left out."""
    sources: list[PackageSource] = []
    npm_version = "unknown"
    if (npm_root / "package.json").is_file():
        npm_version = str(json.loads((npm_root / "package.json").read_text()).get("version"))
    docs = npm_root / "docs" / "content"
    if docs.is_dir():
        files = _listed(docs, (".md",), _BOILERPLATE_DOCS)
        if files:
            sources.append(PackageSource("npm", "markdown", docs, npm_version, tuple(files)))
    modules = npm_root / "node_modules"
    if modules.is_dir():
        for manifest in sorted(modules.glob("**/package.json")):
            root = manifest.parent
            rel = root.relative_to(modules)
            if "node_modules" in rel.parts:
                continue
            files = _listed(root, (".md",), _BOILERPLATE_DOCS)
            if not files:
                continue
            try:
                version = str(json.loads(manifest.read_text()).get("version", "unknown"))
            except (ValueError, OSError):
                version = "unknown"
            sources.append(
                PackageSource(_doc_name(rel.as_posix()), "markdown", root, version, tuple(files))
            )
    if debian.is_dir():
        for root in sorted(p for p in debian.iterdir() if p.is_dir()):
            files = [
                f.name
                for f in sorted(root.glob("*.md"))
                if f.is_file() and not _BOILERPLATE_DOCS.match(f.name)
            ]
            if files:
                name = "debian-" + _doc_name(root.name)
                sources.append(PackageSource(name, "markdown", root, "debian", tuple(files)))
    return sources


def copy_path(source: PackageSource, rel: str) -> str:
    """Where a file lands in its repository copy: under the package's name (so Python
    qualified names are real import paths), without directories the indexer treats as
    vendored (`dist/` holds most npm packages' code)."""
    parts = [p for p in Path(rel).parts if p not in VENDORED_DIRS]
    return "/".join([source.name, *parts])


def read_sources(source: PackageSource) -> dict[str, str]:
    """The package's files by their path in the copy; undecodable bytes replaced."""
    out: dict[str, str] = {}
    for rel in source.files:
        target = copy_path(source, rel)
        if target not in out:  # two vendored dirs flattening onto one path: keep the first
            out[target] = (source.root / rel).read_bytes().decode("utf-8", errors="replace")
    return out


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


# ---- docstring stripping (the CodeSearchNet method) ----


def _python_docstring_span(tree: ast.Module, lines: list[str], node: CodeNode) -> tuple[int, int]:
    """Line span (1-based, inclusive) of the docstring of `node`, or (0, 0)."""
    for item in ast.walk(tree):
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if item.name != node.name or not node.start_line <= item.lineno <= node.end_line:
            continue
        first = item.body[0] if item.body else None
        if not (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
            and first.end_lineno is not None
        ):
            return (0, 0)
        start, end = first.lineno, first.end_lineno
        # The docstring must own its lines, or removing them would cut code.
        if lines[start - 1][: first.col_offset].strip():
            return (0, 0)
        if lines[end - 1][first.end_col_offset or 0 :].strip() not in ("", ";"):
            return (0, 0)
        return (start, end)
    return (0, 0)


def _js_comment_span(lines: list[str], node: CodeNode) -> tuple[int, int]:
    """The comment block right above a JavaScript definition, or (0, 0)."""
    end = node.start_line - 1
    start = end
    while start >= 1 and _JS_COMMENT.match(lines[start - 1]):
        start -= 1
    start += 1
    return (start, end) if start <= end else (0, 0)


def strip_docstrings(
    text: str, language: Language, nodes: Iterable[CodeNode]
) -> tuple[str, set[str]]:
    """`text` with the docstrings (Python) or leading comments (JavaScript) of `nodes`
    removed, and the qualified names whose docstring was removed.

    A Python docstring becomes `pass` at its indentation so that a body never ends up
    empty; a JavaScript comment block is dropped. Spans are cut bottom-up so earlier line
    numbers stay valid while editing.
    """
    lines = text.split("\n")
    spans: list[tuple[int, int, str, str]] = []
    tree: ast.Module | None = None
    if language == "python":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return text, set()
    for node in nodes:
        if tree is not None:
            start, end = _python_docstring_span(tree, lines, node)
            line = lines[start - 1] if start else ""
            replacement = line[: len(line) - len(line.lstrip())] + "pass"
        else:
            start, end = _js_comment_span(lines, node)
            replacement = ""
        if start:
            spans.append((start, end, replacement, node.qualified_name))
    stripped: set[str] = set()
    last_start = len(lines) + 1
    for start, end, replacement, name in sorted(spans, reverse=True):
        if end >= last_start:  # overlapping spans (nested definitions): keep the outer cut
            continue
        lines[start - 1 : end] = [replacement] if replacement else []
        last_start = start
        stripped.add(name)
    return "\n".join(lines), stripped

"""Localisation from history: commit subjects as questions, the functions each commit
changed as answers, the repository indexed at one base commit ("where do I fix X").

    python -m bench.quality.history GIT_DIR BASE [--name NAME] [--origin URL]
                                    [--licence SPDX] [--under src/] [--ext .py]
                                    [--snapshot-dirs src/ tests/] [--out DIR]

Derives the set from a clone with history (nothing is fetched here): for every commit after
BASE (merges left out), the old side of its diff against its first parent is mapped onto
the definitions of the parent's version of each changed source file; the innermost
function or method holding a changed line is an answer when the same path and qualified
name exist at BASE. A commit is kept with 1 to 3 such answers and a subject that is a
question about code (merges, version bumps, reverts, and chores, CI, style, test and
tooling commits are not). It writes `<name>.json` (subjects, commits, base, answers) and
`<name>.tar.xz` (the source files under src/ and tests/ at BASE, the snapshot that is
indexed) under --out.
Only the derived dataset and that snapshot are kept in the repository.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.nodes import CodeNode

CORPORA = Path(__file__).resolve().parent / "corpora"
MAX_ANSWERS = 3
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_PR_SUFFIX = re.compile(r"\s*\((#\d+(,\s*#\d+)*)\)\s*$")
_NOT_A_QUESTION = re.compile(
    r"^(merge|revert|bump|release|prepare|version|\[pre-commit|pre-commit|update changelog|"
    r"changelog|(chore|ci|build|style|tests?|lint)(\([^)]*\))?:)",
    re.IGNORECASE,
)
# Tool chores (lint rules, type-checker upgrades) touch code but ask no question about it.
_TOOLING = re.compile(r"\b(ruff|mypy|pyupgrade|pre-commit|flake8|pylint|linters?|typos)\b", re.I)
_CALLABLE = frozenset({"function", "method"})
_LICENCE = re.compile(r"^(LICEN[CS]E|COPYING)", re.IGNORECASE)


def old_lines(diff: str) -> dict[str, set[int]]:
    """Per file (the old path), the old-side lines a `git diff -U0` touches. A pure
    insertion touches the line it follows and the one after it, so a line added inside a
    function's body counts for that function."""
    out: dict[str, set[int]] = {}
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            name = line[4:].strip()
            current = name[2:] if name.startswith("a/") else None
            continue
        match = _HUNK.match(line)
        if match and current is not None:
            start = int(match.group(1))
            count = int(match.group(2)) if match.group(2) is not None else 1
            lines = out.setdefault(current, set())
            if count == 0:
                lines.update({start, start + 1})
            else:
                lines.update(range(start, start + count))
    return out


def innermost(nodes: Sequence[CodeNode], line: int) -> CodeNode | None:
    """The smallest function or method whose lines hold `line`."""
    holding = [n for n in nodes if n.kind in _CALLABLE and n.start_line <= line <= n.end_line]
    return min(holding, key=lambda n: n.end_line - n.start_line, default=None)


def changed_definitions(nodes: Sequence[CodeNode], lines: Iterable[int]) -> list[str]:
    """Qualified names of the innermost callables touched by `lines`, in first-line order."""
    found: dict[str, int] = {}
    for line in sorted(lines):
        node = innermost(nodes, line)
        if node is not None and node.qualified_name not in found:
            found[node.qualified_name] = line
    return list(found)


def clean_subject(subject: str) -> str | None:
    """The subject as a question, without its pull-request suffix; None when it is not a
    question about code."""
    text = _PR_SUFFIX.sub("", subject).strip()
    if len(text.split()) < 3 or _NOT_A_QUESTION.match(text) or _TOOLING.search(text):
        return None
    return text


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    answers: tuple[tuple[str, str], ...]  # (path, qualified name) at the base commit


def _git(git_dir: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, check=True, timeout=120
    )
    return done.stdout.decode("utf-8", errors="replace")


def _show(git_dir: Path, commit: str, path: str) -> str | None:
    try:
        return _git(git_dir, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return None


def _parse(parser: CodeParser, path: str, text: str | None) -> list[CodeNode]:
    if text is None:
        return []
    parsed = parser.parse(path, text.encode("utf-8"))
    return list(parsed.nodes) if parsed is not None else []


def derive(
    git_dir: Path, base: str, under: Sequence[str] = ("src/",), exts: Sequence[str] = (".py",)
) -> list[Commit]:
    """The questions and answers of every usable commit after `base` (first parent)."""
    parser = CodeParser()
    base_names: dict[str, set[str]] = {}

    def at_base(path: str) -> set[str]:
        if path not in base_names:
            nodes = _parse(parser, path, _show(git_dir, base, path))
            base_names[path] = {n.qualified_name for n in nodes if n.kind in _CALLABLE}
        return base_names[path]

    shas = _git(git_dir, "rev-list", "--no-merges", "--reverse", f"{base}..HEAD").split()
    commits: list[Commit] = []
    for sha in shas:
        subject = clean_subject(_git(git_dir, "log", "-1", "--format=%s", sha).strip())
        if subject is None:
            continue
        diff = _git(git_dir, "diff", "-U0", "--no-renames", f"{sha}^1", sha, "--", *under)
        answers: list[tuple[str, str]] = []
        for path, lines in sorted(old_lines(diff).items()):
            if not path.endswith(tuple(exts)):
                continue
            nodes = _parse(parser, path, _show(git_dir, f"{sha}^1", path))
            answers += [(path, q) for q in changed_definitions(nodes, lines) if q in at_base(path)]
        if 1 <= len(answers) <= MAX_ANSWERS:
            commits.append(Commit(sha, subject, tuple(answers)))
    return commits


def snapshot(
    git_dir: Path, base: str, dirs: Sequence[str], out: Path, exts: Sequence[str] = (".py",)
) -> int:
    """Writes the source files under `dirs` at `base`, and the licence files at the top, as
    a tar.xz; returns the file count."""
    names = [
        n
        for n in _git(git_dir, "ls-tree", "-r", "--name-only", base, "--", *dirs).split("\n")
        if n.endswith(tuple(exts))
    ]
    # The project's licence files travel with its code.
    names += [n for n in _git(git_dir, "ls-tree", "--name-only", base).split() if _LICENCE.match(n)]
    with tarfile.open(out, "w:xz") as tar:
        for name in sorted(names):
            data = subprocess.run(
                ["git", f"--git-dir={git_dir}", "show", f"{base}:{name}"],
                capture_output=True,
                check=True,
            ).stdout
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return len(names)


def load(name: str, corpora: Path = CORPORA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((corpora / f"{name}.json").read_text())
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("base")
    parser.add_argument("--name", default="history-packaging")
    parser.add_argument("--origin", default="https://github.com/pypa/packaging")
    parser.add_argument("--licence", default="Apache-2.0 OR BSD-2-Clause")
    parser.add_argument("--under", nargs="+", default=["src/"])
    parser.add_argument("--snapshot-dirs", nargs="+", default=["src/", "tests/"])
    parser.add_argument("--ext", nargs="+", default=[".py"], help="source file suffixes")
    parser.add_argument("--out", type=Path, default=CORPORA)
    args = parser.parse_args()
    base = _git(args.git_dir, "rev-parse", args.base).strip()
    head = _git(args.git_dir, "rev-parse", "HEAD").strip()
    commits = derive(args.git_dir, base, args.under, args.ext)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{args.name}.tar.xz"
    files = snapshot(args.git_dir, base, args.snapshot_dirs, target, args.ext)
    data = {
        "name": args.name,
        "origin": args.origin,
        "licence": args.licence,
        "base": base,
        "head": head,
        "snapshot": f"{args.name}.tar.xz",
        "snapshot_dirs": args.snapshot_dirs,
        "snapshot_files": files,
        "derivation": "python -m bench.quality.history GIT_DIR BASE (bench/quality/history.py)",
        "queries": [
            {
                "commit": c.sha,
                "subject": c.subject,
                "answers": [{"path": p, "qualified_name": q} for p, q in c.answers],
            }
            for c in commits
        ],
    }
    (args.out / f"{args.name}.json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(commits)} questions from {base[:10]}..{head[:10]}; snapshot {files} files")


if __name__ == "__main__":
    main()

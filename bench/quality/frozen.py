"""The frozen evaluation split (bench/quality/frozen/): a test set, never tuned on.

Corpora and questions the ranking was never tuned on, committed once (frozen_build.py made
them) and checked against MANIFEST.sha256 before every run, so any change to them shows in
review. Two corpora:

- `small-files`: one short top-level function a file, every comment and docstring removed
  (Python, Rust, Go); semantic questions are doc sentences, symbol questions bare names;
- `history`: commit subjects of two Python projects as questions, the functions each
  commit changed as answers, the base release indexed.

There are no tuning and held-out halves: every question is a test question. Sweeps and
other tuning tools refuse it (`refuse_tuning`); `python -m bench.quality --frozen` runs it
once against the external baselines.
"""

from __future__ import annotations

import hashlib
import json
import random
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

from bench.quality.corpus import Language
from bench.quality.datasets import Answer, RepoCopy
from bench.quality.unseen import UnseenClass, UQuery, definitions, parse_tree
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.languages import detect_language

FROZEN_DIR = Path(__file__).resolve().parent / "frozen"
SPLIT = "split.json"
MANIFEST = "MANIFEST.sha256"
SLUG_PREFIX = "local/frozen"
QUICK_PER_CELL = 40  # questions per (repository, class) in --quick
QUICK_SEED = "frozen-quick"
REFUSAL = (
    "the frozen evaluation split (bench/quality/frozen/) is a test set: {tool} does not "
    "tune on it. Tune on the package sets and the unseen corpora; check a finished "
    "candidate once with `python -m bench.quality --frozen`."
)


class FrozenSplitChanged(RuntimeError):
    """A data file of the split differs from MANIFEST.sha256."""


def slug_of(name: str) -> str:
    return f"{SLUG_PREFIX}/{name}"


def is_frozen_slug(slug: str) -> bool:
    return slug.startswith(SLUG_PREFIX + "/")


def refuse_tuning(tool: str) -> NoReturn:
    raise SystemExit(REFUSAL.format(tool=tool))


def refuse_frozen_repos(repos: Iterable[str], tool: str) -> None:
    """Stops a tuning tool that was handed questions of the frozen split."""
    if any(is_frozen_slug(r) for r in repos):
        refuse_tuning(tool)


def is_frozen_run(directory: Path) -> bool:
    """Whether a run's output directory holds a frozen-split run (its results.json says so,
    or its queries.json has answers in the split's repositories)."""
    results = directory / "results.json"
    if results.is_file() and json.loads(results.read_text()).get("split") == "frozen":
        return True
    queries = directory / "queries.json"
    if not queries.is_file():
        return False
    records = json.loads(queries.read_text()).get("queries", [])
    repos = [
        a.get("repo", "")
        for r in records
        for a in [*r.get("answers", []), *([r["answer"]] if "answer" in r else [])]
    ]
    return any(is_frozen_slug(repo) for repo in repos)


def refuse_frozen_run(directory: Path, tool: str) -> None:
    """Stops a tool that compares or tunes over runs when one of them ran the frozen split."""
    if is_frozen_run(directory):
        refuse_tuning(tool)


def manifest(directory: Path = FROZEN_DIR) -> dict[str, str]:
    """File name -> SHA-256, as MANIFEST.sha256 (sha256sum's format) records them."""
    out: dict[str, str] = {}
    for line in (directory / MANIFEST).read_text().splitlines():
        if line.strip():
            digest, name = line.split(None, 1)
            out[name.strip().lstrip("*")] = digest
    return out


def mismatches(directory: Path = FROZEN_DIR) -> list[str]:
    """What differs between the data files and the manifest: a changed or missing file, a
    data file the manifest does not list, an archive split.json names that is not listed."""
    recorded = manifest(directory)
    problems = []
    for name, digest in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name}: changed (SHA-256 differs from {MANIFEST})")
    data = {p.name for p in directory.iterdir() if p.suffix in (".json", ".xz")}
    problems += [f"{n}: not in {MANIFEST}" for n in sorted(data - set(recorded))]
    if (directory / SPLIT).is_file():
        split = json.loads((directory / SPLIT).read_text())
        problems += [
            f"{r['archive']}: named by {SPLIT}, not in {MANIFEST}"
            for r in split["repositories"]
            if r["archive"] not in recorded
        ]
    return problems


def verify(directory: Path = FROZEN_DIR) -> dict[str, Any]:
    """The split, after checking every data file against the manifest."""
    problems = mismatches(directory)
    if problems:
        raise FrozenSplitChanged("; ".join(problems))
    data: dict[str, Any] = json.loads((directory / SPLIT).read_text())
    return data


@dataclass
class Loaded:
    repos: list[RepoCopy]
    queries: list[UQuery]
    split: dict[str, Any]
    notes: dict[str, Any]


def quick_subset(questions: Sequence[dict[str, Any]], per_cell: int) -> list[dict[str, Any]]:
    """At most `per_cell` questions per (repository, class), the same ones every time."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for q in questions:
        cells.setdefault((q["repo"], q["class"]), []).append(q)
    keep: set[str] = set()
    for (repo, klass), members in cells.items():
        ids = sorted(q["id"] for q in members)
        random.Random(f"{QUICK_SEED}-{repo}-{klass}").shuffle(ids)
        keep.update(ids[:per_cell])
    return [q for q in questions if q["id"] in keep]


def extract(archive: Path) -> dict[str, str]:
    """The code files of an archive (what is indexed); licence files stay in the archive."""
    out: dict[str, str] = {}
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or detect_language(member.name) is None:
                continue
            handle = tar.extractfile(member)
            if handle is not None:
                out[member.name] = handle.read().decode("utf-8")
    return out


def load(
    workdir: Path,
    directory: Path = FROZEN_DIR,
    *,
    quick: bool = False,
    per_cell: int = QUICK_PER_CELL,
) -> Loaded:
    """Checks the split, writes each repository under `workdir`/repos and returns its
    questions with answers located in the copy as the project's parser reads it."""
    split = verify(directory)
    questions = list(split["questions"])
    if quick:
        questions = quick_subset(questions, per_cell)
    parser = CodeParser()
    repos: list[RepoCopy] = []
    queries: list[UQuery] = []
    unlocated: list[str] = []
    for record in split["repositories"]:
        name = record["name"]
        files = extract(directory / record["archive"])
        target = workdir / "repos" / name
        for rel, text in files.items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        spans = {
            (f.path, n.qualified_name): (n.start_line, n.end_line)
            for f, n in definitions(parse_tree(parser, files))
        }
        versions = ",".join(s["package"] for s in record["sources"])
        repos.append(
            RepoCopy(
                name,
                slug_of(name),
                cast(Language, record["language"]),
                versions,
                target,
                {p: len(t) for p, t in files.items()},
            )
        )
        for q in questions:
            if q["repo"] != name:
                continue
            answers = []
            for a in q["answers"]:
                span = spans.get((a["path"], a["qualified_name"]))
                if span is None:
                    unlocated.append(q["id"])
                    span = (0, 0)
                answers.append(Answer(slug_of(name), a["path"], a["qualified_name"], *span))
            queries.append(
                UQuery(
                    q["id"],
                    record["corpus"],
                    cast(UnseenClass, q["class"]),
                    record["language"],
                    q["text"],
                    tuple(answers),
                    0,  # no halves: the whole split is the test set
                )
            )
    notes = {"split": split["split"], "quick": quick, "answers_not_parsed": unlocated}
    return Loaded(repos, queries, split, notes)

"""The package sets' external baselines: which candidates each query class is ranked
against, and that a package query ranks the way the unseen harness's queries do."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.quality import package_baselines
from bench.quality.baselines import BM25, tokens
from bench.quality.corpus import write_tree
from bench.quality.datasets import Answer, Query, RepoCopy
from bench.quality.unseen_run import RepoBaseline

PY = """\
def parse_config(text):
    return text.split()


class Loader:
    def load(self, path):
        return open(path).read()
"""

JS = """\
/**
 * Expands braces in a glob pattern.
 */
function expandBraces(pattern) {
  return [pattern];
}
"""

MD = """\
# Tool

Intro line.

## Install

Run the installer with the default options.

## Usage

Call it from the shell.
"""


def _repos(tmp_path: Path) -> list[RepoCopy]:
    out = []
    for name, language, files in (
        ("pkg", "python", {"pkg/core.py": PY, "pkg/README.md": MD}),
        ("js", "javascript", {"js/braces.js": JS}),
        ("docs", "markdown", {"tool/README.md": MD, "tool/notes.txt": "not markdown\n"}),
    ):
        directory = tmp_path / name
        write_tree(directory, files)
        out.append(RepoCopy(name, f"local/quality/{name}", language, "1", directory))  # type: ignore[arg-type]
    return out


def test_code_queries_rank_every_definition_of_every_code_repository(tmp_path: Path) -> None:
    found = package_baselines.code_candidates(_repos(tmp_path))
    keys = [(c.repo, c.qualified_name, c.start_line, c.end_line) for c in found]
    assert ("local/quality/pkg", "pkg.core.parse_config", 1, 2) in keys
    assert ("local/quality/pkg", "pkg.core.Loader.load", 6, 7) in keys
    assert all(c.repo != "local/quality/docs" for c in found)  # markdown is the docs pool
    js = next(c for c in found if c.qualified_name.endswith("expandBraces"))
    # The definition's own lines; its doc comment lies above them, for dense+doc.
    assert js.text.startswith("function expandBraces") and "Expands braces" in js.doc
    parse = next(c for c in found if c.qualified_name.endswith("parse_config"))
    assert parse.text == "def parse_config(text):\n    return text.split()" and parse.doc == ""


def test_docs_queries_rank_every_markdown_chunk_of_the_markdown_repository(
    tmp_path: Path,
) -> None:
    found = package_baselines.section_candidates(_repos(tmp_path))
    assert [(c.path, c.start_line, c.end_line) for c in found] == [
        ("tool/README.md", 1, 4),
        ("tool/README.md", 5, 8),
        ("tool/README.md", 9, 11),
    ]
    assert {c.repo for c in found} == {"local/quality/docs"}  # pkg/README.md is not a docs row
    assert found[1].text == "## Install\n\nRun the installer with the default options."
    assert found[1].qualified_name == "" and found[1].doc == ""


def _query(klass: str, text: str, answer: Answer, half: int = 1) -> Query:
    return Query(f"{klass}-00003", klass, "v", "python", text, answer, half)  # type: ignore[arg-type]


def test_a_package_query_keeps_its_text_answer_and_half() -> None:
    answer = Answer("local/quality/docs", "tool/README.md", "", 5, 8)
    query = _query("docs", "How do I install Tool?", answer)
    converted = package_baselines.as_uquery(query)
    assert (converted.id, converted.text, converted.half) == (query.id, query.text, 1)
    assert converted.answers == (answer,) and converted.repo == "local/quality/docs"
    # A docs answer matches any chunk overlapping its lines, a code answer by name.
    assert converted.matches("local/quality/docs", "tool/README.md", "", 7, 12)
    assert not converted.matches("local/quality/docs", "tool/README.md", "", 9, 11)
    assert package_baselines.is_docs(query)
    code = _query("signature", "def parse_config(text)", Answer("r", "p", "p.f", 1, 2))
    assert not package_baselines.is_docs(code)


def test_package_queries_rank_like_the_unseen_harness(tmp_path: Path) -> None:
    cands = package_baselines.code_candidates(_repos(tmp_path))
    target = next(i for i, c in enumerate(cands) if c.qualified_name.endswith("Loader.load"))
    matrix = np.eye(len(cands), dtype=np.float32)
    documented = matrix.copy()
    base = RepoBaseline(cands, matrix, BM25(tokens(c.text) for c in cands), documented)
    c = cands[target]
    query = _query(
        "semantic", "load the file at a path", Answer(c.repo, c.path, c.qualified_name, 6, 7)
    )
    vector = np.zeros(len(cands), dtype=np.float32)
    vector[target] = 1.0
    ranks = base.ranks(package_baselines.as_uquery(query), vector)
    assert ranks["dense"] == 1 and ranks["dense+doc"] == 1
    assert ranks["bm25"] == 1  # its class holds the same words in more lines
    assert ranks["dense+bm25"] == 1

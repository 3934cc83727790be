"""Structural invariants on real, larger files from the installed packages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from retrieval.indexing.parsing import (
    EDGE_KINDS,
    NODE_KINDS,
    CodeParser,
    ParsedFile,
    detect_language,
)

_SITE = Path(pytest.__file__).resolve().parents[1]  # site-packages of the running venv
REAL_FILES = [
    "pathspec/pathspec.py",
    "_pytest/python.py",
    "wrapt/_wrappers.c",
    "sklearn/svm/src/libsvm/svm.cpp",
    "numpy/_core/include/numpy/ndarraytypes.h",
]
_STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _check(parsed: ParsedFile, source: bytes) -> None:
    total_lines = max(1, source.count(b"\n") + (0 if source.endswith(b"\n") else 1))
    qnames = [n.qualified_name for n in parsed.nodes]
    assert len(qnames) == len(set(qnames)), "qualified names are unique within a file"
    by_qname = {n.qualified_name: n for n in parsed.nodes}
    module = parsed.nodes[0]
    assert module.kind == "module"
    assert (module.start_line, module.end_line) == (1, total_lines)
    assert [n for n in parsed.nodes if n.kind == "module"] == [module]
    for node in parsed.nodes[1:]:
        assert node.kind in NODE_KINDS
        assert node.path == parsed.path
        assert node.language == parsed.language
        assert 1 <= node.start_line <= node.end_line <= total_lines, node.qualified_name
        assert node.parent in by_qname, node.qualified_name
        parent = by_qname[node.parent]
        if parsed.language not in ("go", "c", "cpp"):
            # Go methods and C++ out-of-line members are parented by a type elsewhere
            assert parent.start_line <= node.start_line
            assert node.end_line <= parent.end_line
        assert node.name
        assert "\n" not in node.signature
        assert node.body
    for edge in parsed.edges:
        assert edge.kind in EDGE_KINDS
        assert edge.src in by_qname
        assert edge.dst_name
        if edge.kind == "contains":
            assert by_qname[edge.dst_name].parent == edge.src
    contains = {(e.src, e.dst_name) for e in parsed.edges if e.kind == "contains"}
    assert contains == {(n.parent, n.qualified_name) for n in parsed.nodes[1:]}


@pytest.mark.parametrize("relative", REAL_FILES)
def test_real_file_invariants(relative: str) -> None:
    path = _SITE / relative
    if not path.is_file():
        pytest.skip(f"{relative} is not installed here")
    source = path.read_bytes()
    parsed = CodeParser().parse(relative, source)
    assert parsed is not None
    assert parsed.language == detect_language(relative)
    assert len(parsed.nodes) > 5
    assert any(e.kind == "calls" for e in parsed.edges)
    _check(parsed, source)


def test_pathspec_known_symbols() -> None:
    path = _SITE / "pathspec/pathspec.py"
    if not path.is_file():
        pytest.skip("pathspec is not installed")
    parsed = CodeParser().parse("pathspec/pathspec.py", path.read_bytes())
    assert parsed is not None
    kinds = {n.qualified_name: n.kind for n in parsed.nodes}
    assert kinds["pathspec.pathspec.PathSpec"] == "class"
    assert kinds["pathspec.pathspec.PathSpec.match_file"] == "method"


def test_stdlib_sample_invariants() -> None:
    """A few hundred varied files through one parser: nothing raises, invariants hold."""
    files = sorted(_STDLIB.glob("*.py"))[:150] + sorted(_STDLIB.glob("json/*.py"))
    if not files:
        pytest.skip("no standard library sources here")
    parser = CodeParser()
    for file in files:
        source = file.read_bytes()
        relative = file.relative_to(_STDLIB).as_posix()
        parsed = parser.parse(relative, source)
        assert parsed is not None
        _check(parsed, source)

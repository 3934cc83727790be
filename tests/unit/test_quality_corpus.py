"""Copying sources for the quality harness and stripping docstrings (CodeSearchNet)."""

from __future__ import annotations

import ast
from pathlib import Path

from bench.quality.corpus import PackageSource, copy_path, strip_docstrings
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.nodes import CodeNode

PY = '''"""Module doc."""


class Store:
    """Keeps things.

    At length.
    """

    def get(self, key: str) -> int:
        """Return the value stored under a key."""
        return 1

    def only_doc(self):
        """Nothing but a docstring."""


def inline(): """Shares the line."""
'''

JS = """// helper comment
const x = 1

/**
 * Parse a version string into parts.
 * @param v the version
 */
function parse (v) {
  return v.split('.')
}
"""


def _nodes(path: str, text: str) -> dict[str, CodeNode]:
    parsed = CodeParser().parse(path, text.encode())
    assert parsed is not None
    return {n.qualified_name: n for n in parsed.nodes}


def test_python_docstrings_become_pass_and_code_survives() -> None:
    nodes = _nodes("pkg/mod.py", PY)
    wanted = [nodes["pkg.mod.Store"], nodes["pkg.mod.Store.get"], nodes["pkg.mod.Store.only_doc"]]
    text, cut = strip_docstrings(PY, "python", wanted)
    assert cut == {"pkg.mod.Store", "pkg.mod.Store.get", "pkg.mod.Store.only_doc"}
    ast.parse(text)  # still valid Python
    assert "Keeps things" not in text and "Return the value" not in text
    assert "Module doc" in text and "return 1" in text
    after = _nodes("pkg/mod.py", text)
    assert not after["pkg.mod.Store.get"].docstring


def test_python_docstring_sharing_a_line_is_left_alone() -> None:
    nodes = _nodes("pkg/mod.py", PY)
    text, cut = strip_docstrings(PY, "python", [nodes["pkg.mod.inline"]])
    assert cut == set()
    assert text == PY


def test_javascript_leading_comment_is_removed() -> None:
    nodes = _nodes("lib/semver.js", JS)
    parse = next(n for q, n in nodes.items() if q.endswith(".parse"))
    assert parse.docstring
    text, cut = strip_docstrings(JS, "javascript", [parse])
    assert len(cut) == 1
    assert "Parse a version" not in text
    assert "// helper comment" in text and "return v.split" in text


def test_copy_path_drops_vendored_directories() -> None:
    source = PackageSource("glob", "javascript", Path("/x"), "1", ("dist/commonjs/index.js",))
    assert copy_path(source, "dist/commonjs/index.js") == "glob/commonjs/index.js"
    assert copy_path(source, "lib/a.js") == "glob/lib/a.js"

"""Python extraction: names, kinds, lines, signatures, docstrings and typed edges."""

from __future__ import annotations

import pytest

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile, parse_file

SOURCE = b'''\
"""Retry helpers."""
import os.path
from billing.clock import Clock, now as current
from . import policy


class Backoff(Base, metaclass=Meta):
    """Exponential backoff.

    Doubles every time.
    """

    def __init__(self, base: float = 0.5) -> None:
        self.base = base

    @property
    def delay(self) -> float:
        return self.compute(2)

    @delay.setter
    def delay(self, value: float) -> None:
        self.base = value

    def compute(self, attempt: int) -> float:
        return max(self.base * 2**attempt, current())


def parse_config(
    path: str,
) -> Config:
    """Read the config."""

    def inner():
        return os.path.join(path, "x")

    return Config(inner())
'''


@pytest.fixture(scope="module")
def parsed() -> ParsedFile:
    result = CodeParser().parse("src/billing/retry.py", SOURCE)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_module_node(parsed: ParsedFile) -> None:
    module = parsed.nodes[0]
    assert parsed.language == "python"
    assert parsed.module == "billing.retry"
    assert module.kind == "module"
    assert module.qualified_name == "billing.retry"
    assert (module.start_line, module.end_line) == (1, 36)
    assert module.signature == "src/billing/retry.py"
    assert module.body == SOURCE.decode()
    assert module.parent is None
    assert module.docstring == "Retry helpers."


def test_qualified_names_kinds_and_parents(parsed: ParsedFile) -> None:
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    assert got == {
        ("billing.retry.Backoff", "class", "billing.retry"),
        ("billing.retry.Backoff.__init__", "method", "billing.retry.Backoff"),
        ("billing.retry.Backoff.delay", "method", "billing.retry.Backoff"),
        ("billing.retry.Backoff.delay#2", "method", "billing.retry.Backoff"),
        ("billing.retry.Backoff.compute", "method", "billing.retry.Backoff"),
        ("billing.retry.parse_config", "function", "billing.retry"),
        ("billing.retry.parse_config.inner", "function", "billing.retry.parse_config"),
    }
    assert _node(parsed, "billing.retry.Backoff.delay#2").name == "delay"


def test_lines_signatures_docstrings(parsed: ParsedFile) -> None:
    backoff = _node(parsed, "billing.retry.Backoff")
    assert (backoff.start_line, backoff.end_line) == (7, 25)
    assert backoff.signature == "class Backoff(Base, metaclass=Meta):"
    assert backoff.docstring == "Exponential backoff.\n\nDoubles every time."
    assert backoff.body.startswith("class Backoff(Base, metaclass=Meta):")
    assert backoff.body.endswith("current())")

    delay = _node(parsed, "billing.retry.Backoff.delay")
    # the decorator belongs to the definition's text, not to its signature
    assert (delay.start_line, delay.end_line) == (16, 18)
    assert delay.signature == "def delay(self) -> float:"
    assert delay.body.startswith("@property")
    assert delay.docstring is None

    parse_config = _node(parsed, "billing.retry.parse_config")
    assert (parse_config.start_line, parse_config.end_line) == (28, 36)
    assert parse_config.signature == "def parse_config( path: str, ) -> Config:"
    assert parse_config.docstring == "Read the config."


def test_edges(parsed: ParsedFile) -> None:
    edges = set(parsed.edges)
    imports = {e.dst_name for e in parsed.edges if e.kind == "imports"}
    assert imports == {"os.path", "billing.clock.Clock", "billing.clock.now", "billing.policy"}
    assert all(e.src == "billing.retry" for e in parsed.edges if e.kind == "imports")
    assert Edge("billing.retry.Backoff", "Base", "inherits") in edges
    # metaclass= is a keyword, not a base
    assert {e.dst_name for e in parsed.edges if e.kind == "inherits"} == {"Base"}
    calls = {(e.src, e.dst_name) for e in parsed.edges if e.kind == "calls"}
    assert calls == {
        ("billing.retry.Backoff.delay", "self.compute"),
        ("billing.retry.Backoff.compute", "max"),
        ("billing.retry.Backoff.compute", "current"),
        ("billing.retry.parse_config.inner", "os.path.join"),
        ("billing.retry.parse_config", "Config"),
        ("billing.retry.parse_config", "inner"),
        # a decorator runs the named callable with the function: a use of it
        ("billing.retry.Backoff.delay", "property"),
        ("billing.retry.Backoff.delay#2", "delay.setter"),
    }
    assert Edge("billing.retry", "billing.retry.Backoff", "contains") in edges
    assert Edge("billing.retry.Backoff", "billing.retry.Backoff.compute", "contains") in edges
    assert (
        Edge("billing.retry.parse_config", "billing.retry.parse_config.inner", "contains") in edges
    )


def test_calls_are_deduplicated_per_source() -> None:
    src = b"def f():\n    g()\n    g()\n    h.g()\n\ndef k():\n    g()\n"
    parsed = parse_file("m.py", src)
    assert parsed is not None
    calls = [(e.src, e.dst_name) for e in parsed.edges if e.kind == "calls"]
    assert sorted(calls) == [("m.f", "g"), ("m.f", "h.g"), ("m.k", "g")]


def test_calls_on_expressions_keep_the_member_name() -> None:
    src = b"def f():\n    return load(x)().strip()\n"
    parsed = parse_file("m.py", src)
    assert parsed is not None
    assert {e.dst_name for e in parsed.edges if e.kind == "calls"} == {"load", "strip"}


def test_chained_calls_are_listed_receiver_first() -> None:
    """Calls chained on one receiver start at the same byte; they are listed innermost
    first (by start, then end), so a node's calls, and the summary that lists them, come
    out the same in every process (the grammar's capture order among them does not)."""
    src = (
        b"def f(G):\n"
        b"    a = nx.adjacency_matrix(G).toarray()\n"
        b"    return G.subgraph(a).copy().nodes()\n"
    )
    for _ in range(3):
        parsed = parse_file("m.py", src)
        assert parsed is not None
        calls = [e.dst_name for e in parsed.edges if e.kind == "calls"]
        assert calls == ["nx.adjacency_matrix", "toarray", "G.subgraph", "copy", "nodes"]


@pytest.mark.parametrize(
    ("path", "module", "source", "expected"),
    [
        ("pkg/sub/mod.py", "pkg.sub.mod", b"from . import a", {"pkg.sub.a"}),
        ("pkg/sub/mod.py", "pkg.sub.mod", b"from ..x import b", {"pkg.x.b"}),
        ("pkg/sub/__init__.py", "pkg.sub", b"from .y import c", {"pkg.sub.y.c"}),
        ("lib/pkg/mod.py", "pkg.mod", b"from os import *", {"os"}),
        ("a.py", "a", b"import x.y as z, w", {"x.y", "w"}),
    ],
)
def test_module_names_and_relative_imports(
    path: str, module: str, source: bytes, expected: set[str]
) -> None:
    parsed = parse_file(path, source)
    assert parsed is not None
    assert parsed.module == module
    assert {e.dst_name for e in parsed.edges if e.kind == "imports"} == expected


def test_source_roots_strip_a_prefix() -> None:
    parsed = parse_file("services/retrieval/x.py", b"", source_roots=("services",))
    assert parsed is not None
    assert parsed.module == "retrieval.x"
    assert (parsed.nodes[0].start_line, parsed.nodes[0].end_line) == (1, 1)


def test_syntax_errors_still_yield_nodes() -> None:
    parsed = parse_file("m.py", b"def ok():\n    pass\n\ndef broken(:\n")
    assert parsed is not None
    assert parsed.has_errors
    assert "m.ok" in {n.qualified_name for n in parsed.nodes}


def test_unknown_extension_is_not_parsed() -> None:
    assert parse_file("README.md", b"# hi") is None
    assert parse_file("Makefile", b"all:") is None

"""Java extraction: package-qualified types, overloads, extends/implements."""

from __future__ import annotations

import pytest

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

SOURCE = b"""\
package com.example.billing;

import java.util.List;
import static org.junit.Assert.*;

/**
 * Retries failed charges.
 */
@Deprecated
public class Retry<T> extends Base implements Runnable, Comparable<Retry> {
    private int x;

    public Retry(int x) { this.x = x; }

    /** Runs once. */
    @Override
    public void run() throws Exception {
        this.compute(1);
        helper();
        Policy.check();
        new Thing();
    }

    int compute(int a) { return a; }
    int compute(String a) { return 1; }

    interface Listener extends EventListener { void on(); }
}
"""


@pytest.fixture(scope="module")
def parsed() -> ParsedFile:
    result = CodeParser().parse("src/main/java/com/example/billing/Retry.java", SOURCE)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_names_kinds_parents(parsed: ParsedFile) -> None:
    assert parsed.module == "com.example.billing"
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    cls = "com.example.billing.Retry"
    assert got == {
        (cls, "class", "com.example.billing"),
        (f"{cls}.Retry", "method", cls),
        (f"{cls}.run", "method", cls),
        (f"{cls}.compute", "method", cls),
        (f"{cls}.compute#2", "method", cls),
        (f"{cls}.Listener", "interface", cls),
        (f"{cls}.Listener.on", "method", f"{cls}.Listener"),
    }


def test_signatures_lines_docs(parsed: ParsedFile) -> None:
    cls = _node(parsed, "com.example.billing.Retry")
    assert cls.signature == (
        "@Deprecated public class Retry<T> extends Base implements Runnable, Comparable<Retry>"
    )
    assert (cls.start_line, cls.end_line) == (9, 28)
    assert cls.docstring == "Retries failed charges."
    run = _node(parsed, "com.example.billing.Retry.run")
    assert run.signature == "@Override public void run() throws Exception"
    assert run.docstring == "Runs once."
    assert (run.start_line, run.end_line) == (16, 22)
    assert _node(parsed, "com.example.billing.Retry.compute#2").signature == (
        "int compute(String a)"
    )


def test_edges(parsed: ParsedFile) -> None:
    cls = "com.example.billing.Retry"
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {
        "java.util.List",
        "org.junit.Assert",
    }
    assert Edge(cls, "Base", "inherits") in edges
    assert Edge(cls, "Runnable", "implements") in edges
    assert Edge(cls, "Comparable", "implements") in edges
    assert Edge(f"{cls}.Listener", "EventListener", "inherits") in edges
    calls = {e.dst_name for e in edges if e.kind == "calls" and e.src == f"{cls}.run"}
    assert calls == {"this.compute", "helper", "Policy.check", "Thing"}


def test_default_package_uses_the_file() -> None:
    parsed = CodeParser().parse("Main.java", b"class Main { void go() {} }")
    assert parsed is not None
    assert parsed.module == "Main.java"
    assert parsed.nodes[0].name == "Main.java"
    assert {n.qualified_name for n in parsed.nodes} == {"Main.java", "Main", "Main.go"}

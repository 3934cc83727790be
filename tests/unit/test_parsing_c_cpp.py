"""C and C++ extraction: functions, records, classes, namespaces, includes."""

from __future__ import annotations

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

CPP = b"""\
#include <vector>
#include "net/socket.h"

namespace billing { namespace retry {

/* Computes delays. */
class Backoff : public Base, private Other<int> {
public:
  int compute(int a) const { return helper(a) + this->scale(); }
  virtual void decl();
  Backoff() : x(0) {}
};

template <typename T> T tmax(T a) { return std::max<T>(a, a); }

// Out of line.
void Backoff::decl() { obj->run(); }

} }

int main(int argc, char** argv) { return 0; }
"""

C = b"""\
#include <stdio.h>
#include "util.h"

/* A point. */
typedef struct { int x; } Point;

struct list { struct list *next; };

// Adds.
static int *add(int a,
                int b) {
  return calloc(a, b);
}

int prototype(void);
"""


def _parse(path: str, source: bytes) -> ParsedFile:
    result = CodeParser().parse(path, source)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_cpp() -> None:
    parsed = _parse("src/billing/backoff.cpp", CPP)
    assert parsed.language == "cpp"
    # definitions are global names; the module is the file and keeps its extension
    assert parsed.module == "billing.backoff.cpp"
    assert parsed.nodes[0].name == "backoff.cpp"
    m = "billing.backoff.cpp"
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    cls = "billing.retry.Backoff"
    assert got == {
        (cls, "class", m),
        (f"{cls}.compute", "method", cls),
        (f"{cls}.Backoff", "method", cls),
        ("billing.retry.tmax", "function", m),
        (f"{cls}.decl", "method", cls),  # Backoff::decl is parented by the class
        ("main", "function", m),
    }
    backoff = _node(parsed, cls)
    assert backoff.signature == "class Backoff : public Base, private Other<int>"
    assert backoff.docstring == "Computes delays."
    assert (backoff.start_line, backoff.end_line) == (7, 12)
    assert _node(parsed, "billing.retry.tmax").signature == "template <typename T> T tmax(T a)"
    decl = _node(parsed, f"{cls}.decl")
    assert (decl.signature, decl.docstring) == ("void Backoff::decl()", "Out of line.")
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {"vector", "net/socket.h"}
    assert Edge(cls, "Base", "inherits") in edges
    assert Edge(cls, "Other", "inherits") in edges
    calls = {(e.src, e.dst_name) for e in edges if e.kind == "calls"}
    assert calls == {
        (f"{cls}.compute", "helper"),
        (f"{cls}.compute", "this.scale"),
        ("billing.retry.tmax", "std.max"),
        (f"{cls}.decl", "obj.run"),
    }


def test_c() -> None:
    parsed = _parse("util/list.c", C)
    assert parsed.language == "c"
    assert parsed.module == "util.list.c"
    got = {(n.qualified_name, n.kind) for n in parsed.nodes[1:]}
    # prototypes are declarations, not definitions
    assert got == {("Point", "struct"), ("list", "struct"), ("add", "function")}
    add = _node(parsed, "add")
    assert add.signature == "static int *add(int a, int b)"
    assert (add.start_line, add.end_line, add.docstring) == (10, 13, "Adds.")
    assert _node(parsed, "Point").docstring == "A point."
    assert Edge("add", "calloc", "calls") in parsed.edges
    assert {e.dst_name for e in parsed.edges if e.kind == "imports"} == {"stdio.h", "util.h"}


def test_header_is_c() -> None:
    parsed = _parse("include/x.h", b"int f(void) { return 1; }\n")
    assert parsed.language == "c"
    assert [n.qualified_name for n in parsed.nodes] == ["include.x.h", "f"]


def test_export_macro_between_class_keyword_and_name() -> None:
    source = (
        b"namespace c10d {\nclass TORCH_API Group : public Base {\n"
        b" public:\n  int rank() const { return r; }\n};\n}\n"
    )
    parsed = _parse("group.hpp", source)
    assert not parsed.has_errors
    group = _node(parsed, "c10d.Group")
    assert group.kind == "class"
    # the node's text is the file's, macro included
    assert group.signature == "class TORCH_API Group : public Base"
    assert _node(parsed, "c10d.Group.rank").parent == "c10d.Group"
    assert Edge("c10d.Group", "Base", "inherits") in parsed.edges

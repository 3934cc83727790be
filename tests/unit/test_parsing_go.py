"""Go extraction: package-qualified names and methods named through their receiver."""

from __future__ import annotations

import pytest

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

SOURCE = b"""\
// Package server answers requests.
package server

import (
\t"context"
\th "net/http"
)

// Handle answers one request.
// It retries once.
func (s *Server) Handle(ctx context.Context, req *Request) (*Response, error) {
\th.Get("x")
\ts.retry(ctx)
\treturn nil, nil
}

// Server serves.
type Server struct {
\tBase
\tname string
}

type Handler interface {
\tHandle(ctx context.Context) error
}

func (c Client) Do() {}

func New[T any](x T) *Server { return build(x) }

func init() {}
func init() {}
"""


@pytest.fixture(scope="module")
def parsed() -> ParsedFile:
    result = CodeParser().parse("internal/server/server.go", SOURCE)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_module_is_the_package(parsed: ParsedFile) -> None:
    assert parsed.language == "go"
    assert parsed.module == "server"
    assert parsed.nodes[0].docstring == "Package server answers requests."


def test_receiver_method_named_and_parented_through_the_struct(parsed: ParsedFile) -> None:
    handle = _node(parsed, "server.Server.Handle")
    assert handle.kind == "method"
    assert handle.name == "Handle"
    assert handle.parent == "server.Server"  # declared later in the same file
    assert handle.signature == (
        "func (s *Server) Handle(ctx context.Context, req *Request) (*Response, error)"
    )
    assert (handle.start_line, handle.end_line) == (11, 15)
    assert handle.docstring == "Handle answers one request.\nIt retries once."
    assert Edge("server.Server", "server.Server.Handle", "contains") in parsed.edges


def test_method_of_a_type_in_another_file_hangs_off_the_module(parsed: ParsedFile) -> None:
    do = _node(parsed, "server.Client.Do")
    assert do.parent == "server"
    assert do.kind == "method"


def test_types_and_functions(parsed: ParsedFile) -> None:
    server = _node(parsed, "server.Server")
    assert (server.kind, server.signature, server.docstring) == (
        "struct",
        "type Server struct",
        "Server serves.",
    )
    assert (server.start_line, server.end_line) == (18, 21)
    handler = _node(parsed, "server.Handler")
    assert (handler.kind, handler.signature) == ("interface", "type Handler interface")
    elem = _node(parsed, "server.Handler.Handle")
    assert (elem.kind, elem.parent, elem.signature) == (
        "method",
        "server.Handler",
        "Handle(ctx context.Context) error",
    )
    new = _node(parsed, "server.New")
    assert (new.kind, new.signature) == ("function", "func New[T any](x T) *Server")
    # two init functions are legal Go: the second is disambiguated
    assert _node(parsed, "server.init#2").name == "init"


def test_edges(parsed: ParsedFile) -> None:
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {"context", "net/http"}
    assert Edge("server.Server.Handle", "h.Get", "calls") in edges
    assert Edge("server.Server.Handle", "s.retry", "calls") in edges
    assert Edge("server.New", "build", "calls") in edges
    # an embedded struct is Go's inheritance
    assert Edge("server.Server", "Base", "inherits") in edges

"""Rust extraction: items, impl blocks, traits, ``use`` trees."""

from __future__ import annotations

import pytest

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

SOURCE = b"""\
use std::collections::{HashMap, HashSet as Set};
use crate::net::tcp::Conn;
use super::util::*;
mod wire;

/// A server.
/// Holds state.
#[derive(Debug)]
pub struct Server<T> {
    inner: T,
}

pub trait Handler: Send {
    fn handle(&self) -> u8;
    fn name(&self) -> String { String::new() }
}

impl<T> Server<T> {
    /// Builds one.
    pub fn new(x: T) -> Self {
        Self::build(x);
        helper::<u8>();
        Vec::<u8>::new()
    }
}

impl fmt::Display for Server<u8> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { self.inner.fmt(f) }
}

impl Handler for Server<u8> {
    fn handle(&self) -> u8 { self.name(); 0 }
}

pub enum State { Idle }

mod inner {
    pub fn f() {}
}
"""


@pytest.fixture(scope="module")
def parsed() -> ParsedFile:
    result = CodeParser().parse("crates/net/src/server/mod.rs", SOURCE)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_names(parsed: ParsedFile) -> None:
    assert parsed.module == "server"  # crate-relative, mod.rs is its directory
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    assert got == {
        ("server.Server", "struct", "server"),
        ("server.Handler", "trait", "server"),
        ("server.Handler.handle", "method", "server.Handler"),
        ("server.Handler.name", "method", "server.Handler"),
        ("server.Server.impl", "impl", "server"),
        ("server.Server.new", "method", "server.Server.impl"),
        ("server.Server.impl.Display", "impl", "server"),
        ("server.Server.fmt", "method", "server.Server.impl.Display"),
        ("server.Server.impl.Handler", "impl", "server"),
        ("server.Server.handle", "method", "server.Server.impl.Handler"),
        ("server.State", "enum", "server"),
        ("server.inner.f", "function", "server"),
    }


def test_attributes_docs_signatures(parsed: ParsedFile) -> None:
    server = _node(parsed, "server.Server")
    assert server.docstring == "A server.\nHolds state."
    assert server.signature == "pub struct Server<T>"
    # #[derive] is part of the item's text
    assert (server.start_line, server.end_line) == (8, 11)
    assert server.body.startswith("#[derive(Debug)]")
    new = _node(parsed, "server.Server.new")
    assert new.signature == "pub fn new(x: T) -> Self"
    assert new.docstring == "Builds one."
    assert _node(parsed, "server.Server.impl.Display").signature == (
        "impl fmt::Display for Server<u8>"
    )
    assert _node(parsed, "server.Handler.handle").signature == "fn handle(&self) -> u8"


def test_edges(parsed: ParsedFile) -> None:
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {
        "std.collections.HashMap",
        "std.collections.HashSet",
        "crate.net.tcp.Conn",
        "super.util",
        "server.wire",
    }
    assert Edge("server.Server.impl.Handler", "Handler", "implements") in edges
    assert Edge("server.Server.impl.Display", "fmt.Display", "implements") in edges
    assert Edge("server.Handler", "Send", "inherits") in edges
    calls = {(e.src, e.dst_name) for e in edges if e.kind == "calls"}
    assert {
        ("server.Server.new", "Self.build"),
        ("server.Server.new", "helper"),
        ("server.Server.new", "Vec.new"),  # turbofish arguments dropped
        ("server.Server.handle", "self.name"),
        ("server.Handler.name", "String.new"),
    } <= calls

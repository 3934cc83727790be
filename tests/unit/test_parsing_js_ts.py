"""JavaScript, TypeScript and TSX extraction."""

from __future__ import annotations

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

TS = b"""\
import { a, b as c } from './util';
import * as path from "node:path";
export * from './re';

/**
 * Handles requests.
 */
export abstract class Service<T> extends Base<T> implements IFoo, IBar {
  private x = 1;
  handle = (req: Req): void => { this.go(); };
  async run(x: number): Promise<void> {
    this.retry(x);
    await util.fetch(x);
    new Thing(1);
  }
  abstract stop(): void;
}

export interface IFoo extends IBase { go(): void }
export enum Color { Red, Green }
// Adds one.
export function top(a: number): number { return helper(a); }
export const arrow = async (x: number) => { return x; };
namespace NS { export function inner() {} }
"""

JS = b"""\
const fs = require('fs');
import x from './x.js';
// Doc for A
class A extends B.C {
  static make() { return new A(); }
  get y() { return 1; }
  set y(v) {}
  field = () => fs.readFileSync('a');
}
function* gen() {}
const f = function named() {}, g = () => 1;
"""

TSX = b"""\
import React from 'react';
export function Button({ label }: Props) {
  return <button onClick={() => track(label)}>{label}</button>;
}
"""


def _parse(path: str, source: bytes) -> ParsedFile:
    result = CodeParser().parse(path, source)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_typescript_nodes() -> None:
    parsed = _parse("src/app/service.ts", TS)
    assert parsed.language == "typescript"
    assert parsed.module == "app.service"
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    m = "app.service"
    assert got == {
        (f"{m}.Service", "class", m),
        (f"{m}.Service.handle", "method", f"{m}.Service"),
        (f"{m}.Service.run", "method", f"{m}.Service"),
        (f"{m}.Service.stop", "method", f"{m}.Service"),
        (f"{m}.IFoo", "interface", m),
        (f"{m}.IFoo.go", "method", f"{m}.IFoo"),
        (f"{m}.Color", "enum", m),
        (f"{m}.top", "function", m),
        (f"{m}.arrow", "function", m),
        (f"{m}.NS.inner", "function", m),  # namespaces prefix names but make no node
    }
    service = _node(parsed, f"{m}.Service")
    assert service.signature == (
        "export abstract class Service<T> extends Base<T> implements IFoo, IBar"
    )
    assert service.docstring == "Handles requests."
    assert (service.start_line, service.end_line) == (8, 17)
    assert _node(parsed, f"{m}.top").docstring == "Adds one."
    assert _node(parsed, f"{m}.top").signature == "export function top(a: number): number"
    assert _node(parsed, f"{m}.arrow").signature == "export const arrow = async (x: number) =>"
    assert _node(parsed, f"{m}.Service.run").signature == "async run(x: number): Promise<void>"


def test_typescript_edges() -> None:
    parsed = _parse("src/app/service.ts", TS)
    m = "app.service"
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {
        "./util",
        "node:path",
        "./re",
    }
    assert Edge(f"{m}.Service", "Base", "inherits") in edges
    assert Edge(f"{m}.Service", "IFoo", "implements") in edges
    assert Edge(f"{m}.Service", "IBar", "implements") in edges
    assert Edge(f"{m}.IFoo", "IBase", "inherits") in edges
    calls = {(e.src, e.dst_name) for e in edges if e.kind == "calls"}
    assert calls == {
        (f"{m}.Service.handle", "this.go"),
        (f"{m}.Service.run", "this.retry"),
        (f"{m}.Service.run", "util.fetch"),
        (f"{m}.Service.run", "Thing"),
        (f"{m}.top", "helper"),
    }


def test_javascript() -> None:
    parsed = _parse("lib/widgets/index.js", JS)
    assert parsed.language == "javascript"
    assert parsed.module == "widgets"
    names = [n.qualified_name for n in parsed.nodes]
    assert names == [
        "widgets",
        "widgets.A",
        "widgets.A.make",
        "widgets.A.y",
        "widgets.A.y#2",
        "widgets.A.field",
        "widgets.gen",
        "widgets.f",
        "widgets.g",
    ]
    a = _node(parsed, "widgets.A")
    assert (a.docstring, a.signature) == ("Doc for A", "class A extends B.C")
    assert _node(parsed, "widgets.f").signature == "f = function named()"
    edges = set(parsed.edges)
    assert Edge("widgets.A", "B.C", "inherits") in edges
    assert {e.dst_name for e in edges if e.kind == "imports"} == {"fs", "./x.js"}
    assert Edge("widgets.A.make", "A", "calls") in edges
    assert Edge("widgets.A.field", "fs.readFileSync", "calls") in edges
    # require() is an import, not a call
    assert "require" not in {e.dst_name for e in edges if e.kind == "calls"}


def test_tsx() -> None:
    parsed = _parse("web/Button.tsx", TSX)
    assert parsed.language == "tsx"
    assert parsed.module == "web.Button"
    button = _node(parsed, "web.Button.Button")
    assert button.signature == "export function Button({ label }: Props)"
    # the inline arrow function is not a named definition: its calls belong to Button
    assert Edge("web.Button.Button", "track", "calls") in parsed.edges
    assert not parsed.has_errors

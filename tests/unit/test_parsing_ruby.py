"""Ruby extraction: classes, modules as namespaces, methods, requires, mixins."""

from __future__ import annotations

from retrieval.indexing.parsing import CodeNode, CodeParser, Edge, ParsedFile

SOURCE = b"""\
require 'json'
require_relative 'billing/policy'

module Billing
  # Retries charges.
  # Twice.
  class Retry < Base::Thing
    include Comparable

    def run(x, y = 1)
      compute(x)
      self.helper
      JSON.parse(x)
    end

    def self.build; new; end
  end
end

class Billing::Other; end
def top; end
"""


def _parse() -> ParsedFile:
    result = CodeParser().parse("lib/billing/retry.rb", SOURCE)
    assert result is not None
    return result


def _node(parsed: ParsedFile, qname: str) -> CodeNode:
    return next(n for n in parsed.nodes if n.qualified_name == qname)


def test_names() -> None:
    parsed = _parse()
    assert parsed.module == "billing.retry.rb"
    m = parsed.module
    got = {(n.qualified_name, n.kind, n.parent) for n in parsed.nodes[1:]}
    assert got == {
        ("Billing.Retry", "class", m),
        ("Billing.Retry.run", "method", "Billing.Retry"),
        ("Billing.Retry.build", "method", "Billing.Retry"),
        ("Billing.Other", "class", m),
        ("top", "function", m),
    }
    retry = _node(parsed, "Billing.Retry")
    assert retry.signature == "class Retry < Base::Thing"
    assert retry.docstring == "Retries charges.\nTwice."
    assert (retry.start_line, retry.end_line) == (7, 17)
    assert _node(parsed, "Billing.Retry.run").signature == "def run(x, y = 1)"
    assert _node(parsed, "Billing.Retry.build").signature == "def self.build"


def test_edges() -> None:
    parsed = _parse()
    edges = set(parsed.edges)
    assert {e.dst_name for e in edges if e.kind == "imports"} == {"json", "./billing/policy"}
    assert Edge("Billing.Retry", "Base.Thing", "inherits") in edges
    assert Edge("Billing.Retry", "Comparable", "implements") in edges
    calls = {(e.src, e.dst_name) for e in edges if e.kind == "calls"}
    assert calls == {
        ("Billing.Retry.run", "compute"),
        ("Billing.Retry.run", "self.helper"),
        ("Billing.Retry.run", "JSON.parse"),
    }

"""The interface each language implements for the shared extractor (``extract.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from .modnames import module_name

CLASS_LIKE: frozenset[str] = frozenset(("class", "struct", "interface", "trait", "impl", "enum"))


def node_text(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Scope:
    """What a definition sees of the definition that contains it."""

    kind: str  # a node kind, or "namespace" for scopes that make no node (C++ namespace)
    qualified_name: str  # the node's own name; for a namespace, the nearest real node's
    prefix: str  # what children's qualified names start with


@dataclass(slots=True)
class Definition:
    """A definition as a language rule describes it; the extractor turns it into a node."""

    kind: str  # a node kind, or "namespace"
    name: str
    start_byte: int  # the whole definition, decorators/attributes/export included
    end_byte: int
    start_row: int
    end_row: int
    end_column: int
    sig_start: int
    sig_end: int  # where the body starts; equal to end_byte when there is no body
    sig_row: int  # the signature's first row, 0-based: where bases and interfaces are named
    # Segments between the enclosing prefix and the name (Go receiver type, C++ ``A::f``);
    # the node's parent is the definition they name when that exists in the file.
    qualifier: tuple[str, ...] = ()
    # Replaces the node's own qualified name as the prefix for its children (Rust impls:
    # methods are ``Type.method``, not ``Type.impl.method``).
    child_prefix: str | None = None
    qualified_override: str | None = None
    bases: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    docstring: str | None = None


def definition_span(
    outer: Node, sig_from: Node, body: Node | None, kind: str, name: str
) -> Definition:
    """A Definition covering ``outer`` whose signature runs from ``sig_from`` to ``body``."""
    return Definition(
        kind=kind,
        name=name,
        start_byte=outer.start_byte,
        end_byte=outer.end_byte,
        start_row=outer.start_point.row,
        end_row=outer.end_point.row,
        end_column=outer.end_point.column,
        sig_start=sig_from.start_byte,
        sig_end=body.start_byte if body is not None else outer.end_byte,
        sig_row=sig_from.start_point.row,
    )


class LanguageRules:
    """Defaults shared by every language; subclasses override what differs.

    ``query`` captures ``@def`` (definitions and namespaces), ``@call`` (calls, and uses
    that run a callable without a call: decorators), ``@bind`` (where a name gets a type:
    ``x = Foo()``, ``x: Foo``), ``@import`` and ``@comment``; the extractor runs it once per
    file so that the tree is walked in C.
    """

    language: str = ""
    query: str = ""
    # Whether the comment block above a definition is its documentation.
    comment_docs: bool = True

    def prepare(self, source: bytes) -> bytes:
        """The bytes handed to the grammar; must keep every offset and line of ``source``."""
        return source

    def module_names(
        self, root: Node, path: str, source: bytes, source_roots: Sequence[str]
    ) -> tuple[str, str]:
        """(module qualified name, prefix for top-level definitions)."""
        module = module_name(path, self.language, source_roots)
        return module, module

    def module_docstring(self, root: Node, source: bytes) -> str | None:
        return None

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        raise NotImplementedError

    def definition_start(self, node: Node) -> int:
        """Where the source that belongs to a ``@def`` begins: uses from here on (its
        decorators) are the definition's own, not its container's."""
        return node.start_byte

    def use_line(self, node: Node) -> int:
        """The 1-based line of a ``@call`` use: where the callee's name ends, which is the
        member's own line in a call chained over several lines."""
        return node.end_point.row + 1

    def call_receiver(self, node: Node, source: bytes) -> str | None:
        """The variable a ``recv.member`` use calls through, when it is a plain name."""
        return None

    def binding(self, node: Node, source: bytes) -> tuple[str, str] | None:
        """(name, type as written) for a ``@bind`` capture; the type is empty when the
        source states none (the name still hides an outer one of the same name)."""
        return None

    def imported_names(
        self, node: Node, source: bytes, module: str, path: str
    ) -> list[tuple[str, str]]:
        """(local name, import path) for each name an ``@import`` brings into the file."""
        return []

    def call_target(self, node: Node, source: bytes) -> str | None:
        raise NotImplementedError

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        raise NotImplementedError

"""Value types produced by the parser and the resolver.

Every qualified name uses ``.`` as its separator in every language (Rust ``a::b``, C++
``ns::Class`` and Ruby ``A::B`` included) so that one lookup rule serves the whole index.
Qualified names are unique within one file: a repeated name (overloads, conditional
definitions, several ``init`` functions) gets ``#2``, ``#3``... in source order
(cograph_text.names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

NodeKind = Literal[
    "module", "class", "struct", "interface", "trait", "impl", "enum", "function", "method"
]
EdgeKind = Literal["calls", "imports", "inherits", "implements", "contains"]

NODE_KINDS: frozenset[str] = frozenset(
    ("module", "class", "struct", "interface", "trait", "impl", "enum", "function", "method")
)
EDGE_KINDS: frozenset[str] = frozenset(("calls", "imports", "inherits", "implements", "contains"))
# Kinds a call can land on: constructors are calls to the type in most languages.
CALLABLE_KINDS: frozenset[str] = frozenset(("function", "method", "class", "struct", "enum"))
TYPE_KINDS: frozenset[str] = frozenset(("class", "struct", "interface", "trait", "enum"))


@dataclass(frozen=True, slots=True)
class CodeNode:
    """One symbol: the file's module or a definition inside it."""

    qualified_name: str
    name: str
    kind: NodeKind
    language: str
    path: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    signature: str
    body: str
    parent: str | None
    docstring: str | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """A relation from the node ``src`` to a target named as written in the source.

    For ``contains`` the target is the child's qualified name; for the other kinds it is
    the raw name (``self.retry``, ``http.Get``, ``billing.retry.Backoff``) with ``::`` and
    ``->`` turned into ``.`` and generic arguments dropped.

    One edge stands for every use of one name inside one node: ``lines`` are the 1-based
    lines of those uses in source order (empty for ``contains``). ``receiver`` is set on a
    ``recv.member`` call whose receiver the file itself types: the type as the file writes
    it (``Flask`` for ``app = Flask(...)`` or ``app: Flask``), or, for a name imported from
    another module, its import path (``pkg.app.app``) whose binding the resolver looks up
    in that module. Neither takes part in equality: an edge is its relation.
    """

    src: str
    dst_name: str
    kind: EdgeKind
    lines: tuple[int, ...] = field(default=(), compare=False)
    receiver: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """Everything the parser learnt from one file."""

    path: str
    language: str
    module: str  # qualified name of the file's module node
    nodes: tuple[CodeNode, ...]
    edges: tuple[Edge, ...]
    has_errors: bool = False  # the grammar could not parse part of the file
    # Module-level names whose type the file states (``app = Flask(...)``, ``app: Flask``):
    # name -> the type as written. Other files that import the name find its type here.
    bindings: Mapping[str, str] = field(default_factory=dict)

    @property
    def module_node(self) -> CodeNode:
        return self.nodes[0]


@dataclass(frozen=True, slots=True)
class ResolvedEdge:
    """An edge whose target was looked up across the repository.

    ``dst`` and ``dst_path`` are None when the target is outside the repository or
    ambiguous; ``dst_name`` always keeps the name as written.
    """

    src_path: str
    src: str
    dst_name: str
    kind: EdgeKind
    dst: str | None
    dst_path: str | None


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A line range of a file no grammar understands."""

    path: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    text: str

"""The language-independent half of extraction: naming, nesting, edges, docstrings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tree_sitter import Node, QueryCursor, Tree

from cograph_text.names import numbered

from .comments import CommentIndex
from .languages import Grammars
from .nodes import CodeNode, Edge, NodeKind, ParsedFile
from .rules import Definition, LanguageRules, Scope, node_text
from .text import dotted_target, normalise_ws

_NO_END = 1 << 62


@dataclass(slots=True)
class _Frame:
    scope: Scope
    end_byte: int


def _line_count(source: bytes) -> int:
    if not source:
        return 1
    return source.count(b"\n") + (0 if source.endswith(b"\n") else 1)


def _end_line(start_row: int, end_row: int, end_column: int) -> int:
    # A range that stops at column 0 ends on the previous line.
    if end_column == 0 and end_row > start_row:
        return end_row
    return end_row + 1


def _join(prefix: str, *parts: str) -> str:
    return ".".join(p for p in (prefix, *parts) if p)


class Extractor:
    """Turns one parsed tree into nodes and edges using a language's rules."""

    def __init__(self, rules: LanguageRules, grammars: Grammars) -> None:
        self._rules = rules
        self._parser = grammars.parser(rules.language)
        self._query = grammars.query(rules.language, rules.query)

    def parse(self, path: str, source: bytes, source_roots: Sequence[str]) -> ParsedFile:
        tree = self._parser.parse(self._rules.prepare(source))
        return self.extract(tree, path, source, source_roots)

    def extract(
        self, tree: Tree, path: str, source: bytes, source_roots: Sequence[str]
    ) -> ParsedFile:
        rules = self._rules
        language = rules.language
        root = tree.root_node
        module, root_prefix = rules.module_names(root, path, source, source_roots)
        captures = QueryCursor(self._query).captures(root)

        def_nodes = captures.get("def", [])
        # By start and end: calls chained on one receiver (`g(x).copy()`) start at the same
        # byte, and the captures' own order among them differs from one process to the next
        # (summaries list calls in this order, so an index would differ between runs).
        call_nodes = sorted(captures.get("call", []), key=lambda n: (n.start_byte, n.end_byte))
        comments = CommentIndex(captures.get("comment", []) if rules.comment_docs else (), source)

        last_line = _line_count(source)
        nodes: list[CodeNode] = [
            CodeNode(
                qualified_name=module,
                name=path.rsplit("/", 1)[-1] if not root_prefix else module.rsplit(".", 1)[-1],
                kind="module",
                language=language,
                path=path,
                start_line=1,
                end_line=last_line,
                signature=path,
                body=source.decode("utf-8", "replace"),
                parent=None,
                docstring=rules.module_docstring(root, source),
            )
        ]
        edges: list[Edge] = []
        used: dict[str, int] = {module: 1}
        # (node index, parent hint) for definitions named through a qualifier.
        hinted: list[tuple[int, str]] = []

        module_scope = Scope("module", module, root_prefix)
        stack: list[_Frame] = [_Frame(module_scope, _NO_END)]
        calls_seen: set[tuple[str, str]] = set()
        call_i = 0
        seen_ids: set[int] = set()

        def attribute_calls(until: int) -> None:
            nonlocal call_i
            while call_i < len(call_nodes) and call_nodes[call_i].start_byte < until:
                call = call_nodes[call_i]
                call_i += 1
                while stack[-1].end_byte <= call.start_byte:
                    stack.pop()
                target = rules.call_target(call, source)
                if not target:
                    continue
                src = stack[-1].scope.qualified_name
                if (src, target) not in calls_seen:
                    calls_seen.add((src, target))
                    edges.append(Edge(src, target, "calls"))

        for node in sorted(def_nodes, key=lambda n: (n.start_byte, -n.end_byte)):
            if node.id in seen_ids:
                continue
            seen_ids.add(node.id)
            attribute_calls(node.start_byte)
            while stack[-1].end_byte <= node.start_byte:
                stack.pop()
            scope = stack[-1].scope
            found = rules.describe(node, scope, source)
            if found is None:
                continue
            if found.kind == "namespace":
                prefix = _join(scope.prefix, *found.qualifier, found.name)
                stack.append(
                    _Frame(Scope("namespace", scope.qualified_name, prefix), found.end_byte)
                )
                continue
            qname = found.qualified_override or _join(scope.prefix, *found.qualifier, found.name)
            count = used.get(qname, 0) + 1
            used[qname] = count
            qname = numbered(qname, count)
            if found.qualifier:
                hinted.append((len(nodes), _join(scope.prefix, *found.qualifier)))
            nodes.append(
                _build_node(
                    found,
                    qname,
                    parent=scope.qualified_name,
                    language=language,
                    path=path,
                    source=source,
                    comments=comments,
                )
            )
            for base in found.bases:
                edges.append(Edge(qname, base, "inherits"))
            for iface in found.interfaces:
                edges.append(Edge(qname, iface, "implements"))
            child_prefix = found.child_prefix if found.child_prefix is not None else qname
            stack.append(_Frame(Scope(found.kind, qname, child_prefix), found.end_byte))
        attribute_calls(_NO_END)

        if hinted:
            kinds = {n.qualified_name: n.kind for n in nodes}
            for index, hint in hinted:
                if kinds.get(hint) in ("class", "struct", "interface", "trait", "enum"):
                    nodes[index] = replace(nodes[index], parent=hint)

        import_edges: list[Edge] = []
        seen_imports: set[str] = set()
        for imp in sorted(captures.get("import", []), key=lambda n: (n.start_byte, n.end_byte)):
            for target in rules.imports(imp, source, module, path):
                if target and target not in seen_imports:
                    seen_imports.add(target)
                    import_edges.append(Edge(module, target, "imports"))
        contains = [
            Edge(n.parent, n.qualified_name, "contains") for n in nodes if n.parent is not None
        ]
        return ParsedFile(
            path=path,
            language=language,
            module=module,
            nodes=tuple(nodes),
            edges=tuple(contains + import_edges + edges),
            has_errors=root.has_error,
        )


def _build_node(
    found: Definition,
    qname: str,
    *,
    parent: str,
    language: str,
    path: str,
    source: bytes,
    comments: CommentIndex,
) -> CodeNode:
    sig = normalise_ws(source[found.sig_start : found.sig_end].decode("utf-8", "replace"))
    sig = sig.rstrip("{;").rstrip()
    doc = found.docstring
    if doc is None and comments:
        doc = comments.above(found.start_row)
    kind: NodeKind = found.kind  # type: ignore[assignment]
    return CodeNode(
        qualified_name=qname,
        name=found.name,
        kind=kind,
        language=language,
        path=path,
        start_line=found.start_row + 1,
        end_line=_end_line(found.start_row, found.end_row, found.end_column),
        signature=sig,
        body=source[found.start_byte : found.end_byte].decode("utf-8", "replace"),
        parent=parent,
        docstring=doc,
    )


def call_edge_target(callee: Node | None, source: bytes) -> str | None:
    """The dotted name of a callee expression, shared by most languages."""
    if callee is None:
        return None
    return dotted_target(node_text(callee, source))

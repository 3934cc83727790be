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
    # Where the definition itself starts (after its decorators): decorators see the
    # enclosing scope's names, not the definition's own parameters.
    own_start: int = 0
    # Names typed in this scope; None for scopes whose names a nested function does not
    # see (a class body) or that make no node.
    bindings: dict[str, str] | None = None


@dataclass(slots=True)
class _Use:
    """Every use of one target inside one node, gathered until the file is read: a
    receiver's type may be bound after the use (a module-level name, a loop)."""

    src: str
    target: str
    lines: list[int]
    variable: str | None
    scopes: tuple[dict[str, str], ...]  # innermost first

    def edge(self, imported: dict[str, str]) -> Edge:
        receiver: str | None = None
        if self.variable is not None:
            for names in self.scopes:
                if self.variable in names:
                    bound = names[self.variable]
                    receiver = _through_imports(bound, imported) if bound else None
                    break
            else:
                receiver = imported.get(self.variable)
        return Edge(self.src, self.target, "calls", tuple(sorted(set(self.lines))), receiver)


def _through_imports(type_name: str, imported: dict[str, str]) -> str:
    """A type as written, named by its import path when the file imports its first part
    (`Flask` after `from flasky import Flask` is `flasky.Flask`): the resolver then finds
    it through that module even where another class of the same name exists."""
    head, dot, rest = type_name.partition(".")
    origin = imported.get(head)
    return f"{origin}{dot}{rest}" if origin else type_name


_SCOPES_WITH_NAMES = frozenset(("module", "function", "method"))


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

        rules_start = rules.definition_start
        def_nodes = sorted(
            {n.id: n for n in captures.get("def", [])}.values(),
            key=lambda n: (rules_start(n), -n.end_byte),
        )
        # Uses (calls, decorators) and bindings, by start and end: calls chained on one
        # receiver (`g(x).copy()`) start at the same byte, and the captures' own order among
        # them differs from one process to the next (summaries list calls in this order, so
        # an index would differ between runs).
        events = sorted(
            [(n, False) for n in captures.get("call", [])]
            + [(n, True) for n in captures.get("bind", [])],
            key=lambda e: (e[0].start_byte, e[0].end_byte, e[1]),
        )
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
        edges: list[Edge | _Use] = []
        used: dict[str, int] = {module: 1}
        # (node index, parent hint) for definitions named through a qualifier.
        hinted: list[tuple[int, str]] = []

        module_bindings: dict[str, str] = {}
        module_scope = Scope("module", module, root_prefix)
        stack: list[_Frame] = [_Frame(module_scope, _NO_END, 0, module_bindings)]
        uses: dict[tuple[str, str, int], _Use] = {}
        event_i = 0

        def attribute_uses(until: int) -> None:
            nonlocal event_i
            while event_i < len(events) and events[event_i][0].start_byte < until:
                node, is_binding = events[event_i]
                event_i += 1
                while stack[-1].end_byte <= node.start_byte:
                    stack.pop()
                if is_binding:
                    names = stack[-1].bindings
                    bound = rules.binding(node, source)
                    if names is not None and bound is not None:
                        # The first stated type wins; `x = None` then `x = Foo()` is a Foo.
                        name, type_name = bound
                        if not names.get(name):
                            names[name] = type_name
                    continue
                target = rules.call_target(node, source)
                if not target:
                    continue
                src = stack[-1].scope.qualified_name
                line = rules.use_line(node)
                scopes = tuple(
                    f.bindings
                    for f in reversed(stack)
                    if f.bindings is not None and node.start_byte >= f.own_start
                )
                # A decorator and the body below it see different scopes.
                key = (src, target, len(scopes))
                use = uses.get(key)
                if use is not None:
                    use.lines.append(line)
                    continue
                variable = rules.call_receiver(node, source) if target.count(".") == 1 else None
                use = uses[key] = _Use(src, target, [line], variable, scopes)
                edges.append(use)

        for node in def_nodes:
            start = rules_start(node)
            attribute_uses(start)
            while stack[-1].end_byte <= start:
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
            # Bases and interfaces are named in the signature: its first line is theirs.
            sig_line = (found.sig_row + 1,)
            for base in found.bases:
                edges.append(Edge(qname, base, "inherits", sig_line))
            for iface in found.interfaces:
                edges.append(Edge(qname, iface, "implements", sig_line))
            child_prefix = found.child_prefix if found.child_prefix is not None else qname
            scope_names: dict[str, str] | None = {} if found.kind in _SCOPES_WITH_NAMES else None
            own = Scope(found.kind, qname, child_prefix)
            stack.append(_Frame(own, found.end_byte, node.start_byte, scope_names))
        attribute_uses(_NO_END)

        if hinted:
            kinds = {n.qualified_name: n.kind for n in nodes}
            for index, hint in hinted:
                if kinds.get(hint) in ("class", "struct", "interface", "trait", "enum"):
                    nodes[index] = replace(nodes[index], parent=hint)

        import_edges: list[Edge] = []
        import_lines: dict[str, list[int]] = {}
        imported: dict[str, str] = {}
        for imp in sorted(captures.get("import", []), key=lambda n: (n.start_byte, n.end_byte)):
            line = imp.start_point.row + 1
            for target in rules.imports(imp, source, module, path):
                if target:
                    import_lines.setdefault(target, []).append(line)
            for local, origin in rules.imported_names(imp, source, module, path):
                imported.setdefault(local, origin)
        for target, lines in import_lines.items():
            import_edges.append(Edge(module, target, "imports", tuple(sorted(set(lines)))))
        contains = [
            Edge(n.parent, n.qualified_name, "contains") for n in nodes if n.parent is not None
        ]
        typed: list[Edge] = []
        merged: dict[tuple[str, str, str | None], int] = {}
        for item in edges:
            edge = item if isinstance(item, Edge) else item.edge(imported)
            if edge.kind != "calls":
                typed.append(edge)
                continue
            # One edge per name, node and receiver: uses split only by scope agree again.
            at = merged.setdefault((edge.src, edge.dst_name, edge.receiver), len(typed))
            if at == len(typed):
                typed.append(edge)
            else:
                both = tuple(sorted({*typed[at].lines, *edge.lines}))
                typed[at] = replace(typed[at], lines=both)
        return ParsedFile(
            path=path,
            language=language,
            module=module,
            nodes=tuple(nodes),
            edges=tuple(contains + import_edges + typed),
            has_errors=root.has_error,
            bindings={
                name: _through_imports(bound, imported)
                for name, bound in module_bindings.items()
                if bound
            },
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

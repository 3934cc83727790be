"""Go: package-qualified functions, methods named through their receiver type, types."""

from __future__ import annotations

from collections.abc import Sequence

from tree_sitter import Node

from .comments import CommentIndex
from .extract import call_edge_target
from .modnames import module_name
from .rules import Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_QUERY = """
(function_declaration) @def
(method_declaration) @def
(type_spec type: [(struct_type) (interface_type)]) @def
(interface_type (method_elem) @def)
(call_expression function: (_) @call)
(import_spec) @import
(comment) @comment
"""


def _receiver_type(receiver: Node, source: bytes) -> str | None:
    for param in receiver.named_children:
        type_node = param.child_by_field_name("type")
        if type_node is None:
            continue
        while type_node.type in ("pointer_type", "generic_type", "parenthesized_type"):
            inner = (
                type_node.child_by_field_name("type")
                if type_node.type == "generic_type"
                else type_node.named_children[0]
                if type_node.named_children
                else None
            )
            if inner is None:
                break
            type_node = inner
        return node_text(type_node, source)
    return None


class GoRules(LanguageRules):
    language = "go"
    query = _QUERY

    def module_names(
        self, root: Node, path: str, source: bytes, source_roots: Sequence[str]
    ) -> tuple[str, str]:
        for child in root.named_children:
            if child.type == "package_clause" and child.named_children:
                package = node_text(child.named_children[0], source)
                return package, package
        fallback = module_name(path, self.language, source_roots)
        return fallback, fallback

    def module_docstring(self, root: Node, source: bytes) -> str | None:
        for child in root.named_children:
            if child.type == "package_clause":
                comments = [
                    c
                    for c in root.named_children
                    if c.type == "comment" and c.end_byte <= child.start_byte
                ]
                return CommentIndex(comments, source).above(child.start_point.row)
        return None

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = node_text(name_node, source)
        if node.type == "function_declaration":
            return definition_span(node, node, node.child_by_field_name("body"), "function", name)
        if node.type == "method_declaration":
            found = definition_span(node, node, node.child_by_field_name("body"), "method", name)
            receiver = node.child_by_field_name("receiver")
            owner = _receiver_type(receiver, source) if receiver is not None else None
            if owner:
                found.qualifier = (owner,)
            return found
        if node.type == "method_elem":
            return definition_span(node, node, None, "method", name)
        # type_spec: the whole ``type X struct {...}`` unless it sits in a ``type (...)`` group.
        declaration = node.parent
        outer = (
            declaration
            if declaration is not None
            and declaration.type == "type_declaration"
            and declaration.named_child_count == 1
            else node
        )
        type_node = node.child_by_field_name("type")
        if type_node is None:
            return None
        kind = "struct" if type_node.type == "struct_type" else "interface"
        body = next(
            (c for c in type_node.named_children if c.type == "field_declaration_list"), None
        )
        if kind == "interface":
            found = definition_span(outer, outer, None, kind, name)
            # the signature stops at the interface keyword's brace
            found.sig_end = type_node.start_byte + len(b"interface")
            return found
        found = definition_span(outer, outer, body, kind, name)
        for field in body.named_children if body is not None else []:
            # an embedded struct (a field with only a type) is Go's inheritance
            if field.type == "field_declaration" and field.child_by_field_name("name") is None:
                embedded = field.child_by_field_name("type")
                if embedded is not None:
                    target = dotted_target(node_text(embedded, source).lstrip("*"))
                    if target:
                        found.bases.append(target)
        return found

    def call_target(self, node: Node, source: bytes) -> str | None:
        if node.type == "index_expression":  # generic instantiation f[T](x)
            operand = node.child_by_field_name("operand")
            node = operand if operand is not None else node
        return call_edge_target(node, source)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        target = node.child_by_field_name("path")
        if target is None:
            return []
        return [node_text(target, source).strip('"`')]

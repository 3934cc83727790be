"""Java: package-qualified types, methods and constructors."""

from __future__ import annotations

from collections.abc import Sequence

from tree_sitter import Node

from .modnames import module_name
from .rules import Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_QUERY = """
(class_declaration) @def
(interface_declaration) @def
(enum_declaration) @def
(record_declaration) @def
(annotation_type_declaration) @def
(method_declaration) @def
(constructor_declaration) @def
(compact_constructor_declaration) @def
(method_invocation) @call
(object_creation_expression) @call
(import_declaration) @import
(line_comment) @comment
(block_comment) @comment
"""
_KINDS = {
    "class_declaration": "class",
    "record_declaration": "class",
    "interface_declaration": "interface",
    "annotation_type_declaration": "interface",
    "enum_declaration": "enum",
}


def _type_names(node: Node | None, source: bytes) -> list[str]:
    if node is None:
        return []
    if node.type == "type_list":
        return [n for child in node.named_children for n in _type_names(child, source)]
    if node.type == "generic_type":
        return _type_names(node.named_children[0] if node.named_children else None, source)
    if node.type in ("type_identifier", "scoped_type_identifier"):
        target = dotted_target(node_text(node, source))
        return [target] if target else []
    return [n for child in node.named_children for n in _type_names(child, source)]


class JavaRules(LanguageRules):
    language = "java"
    query = _QUERY

    def module_names(
        self, root: Node, path: str, source: bytes, source_roots: Sequence[str]
    ) -> tuple[str, str]:
        for child in root.named_children:
            if child.type == "package_declaration" and child.named_children:
                package = dotted_target(node_text(child.named_children[0], source))
                if package:
                    return package, package
        # the default package: types are top-level names and the module is the file, which
        # keeps its extension so that Main.java's module and its class Main stay distinct
        return module_name(path, self.language, source_roots, keep_extension=True), ""

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = node_text(name_node, source)
        body = node.child_by_field_name("body")
        kind = _KINDS.get(node.type)
        if kind is None:
            return definition_span(node, node, body, "method", name)
        found = definition_span(node, node, body, kind, name)
        found.bases.extend(_type_names(node.child_by_field_name("superclass"), source))
        found.interfaces.extend(_type_names(node.child_by_field_name("interfaces"), source))
        for child in node.named_children:
            if child.type == "extends_interfaces":  # interface I extends J, K
                found.bases.extend(_type_names(child, source))
        return found

    def use_line(self, node: Node) -> int:
        # The capture is the whole invocation, arguments included: the name is the use.
        name = node.child_by_field_name("name") or node.child_by_field_name("type")
        return (name or node).start_point.row + 1

    def call_target(self, node: Node, source: bytes) -> str | None:
        if node.type == "object_creation_expression":
            type_node = node.child_by_field_name("type")
            names = _type_names(type_node, source)
            return names[0] if names else None
        name = node.child_by_field_name("name")
        if name is None:
            return None
        obj = node.child_by_field_name("object")
        text = node_text(name, source)
        if obj is not None:
            text = node_text(obj, source) + "." + text
        return dotted_target(text)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        for child in node.named_children:
            if child.type in ("scoped_identifier", "identifier"):
                target = dotted_target(node_text(child, source))
                return [target] if target else []
        return []

"""JavaScript, TypeScript and TSX: classes, functions, arrow functions bound to names."""

from __future__ import annotations

from tree_sitter import Node

from .extract import call_edge_target
from .rules import CLASS_LIKE, Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_JS_QUERY = """
(function_declaration) @def
(generator_function_declaration) @def
(class_declaration) @def
(class_body (method_definition) @def)
(variable_declarator name: (identifier) value: [(arrow_function) (function_expression)]) @def
(call_expression function: (_) @call)
(new_expression constructor: (_) @call)
(decorator (identifier) @call)
(decorator (member_expression) @call)
(import_statement) @import
(export_statement source: (_)) @import
(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string))
  (#eq? @_require "require")) @import
(comment) @comment
"""
_JS_FIELDS = """
(class_body (field_definition value: [(arrow_function) (function_expression)]) @def)
"""
_TS_EXTRA = """
(class_body (public_field_definition value: [(arrow_function) (function_expression)]) @def)
(abstract_class_declaration) @def
(class_body (abstract_method_signature) @def)
(interface_declaration) @def
(interface_body (method_signature) @def)
(enum_declaration) @def
(internal_module) @def
"""
_NOT_CALLS = frozenset(("require", "import", "super"))
_FUNCTION_VALUES = ("arrow_function", "function_expression", "generator_function")


def _exported(node: Node) -> Node:
    parent = node.parent
    return parent if parent is not None and parent.type == "export_statement" else node


def _string_content(node: Node | None, source: bytes) -> str | None:
    if node is None:
        return None
    return node_text(node, source).strip("'\"`") or None


class JavaScriptRules(LanguageRules):
    language = "javascript"
    query = _JS_QUERY + _JS_FIELDS

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        kind = node.type
        if kind in ("variable_declarator", "field_definition", "public_field_definition"):
            return self._bound_function(node, scope, source)
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = node_text(name_node, source)
        body = node.child_by_field_name("body")
        if kind == "internal_module":
            found = definition_span(node, node, body, "namespace", "")
            found.qualifier = tuple(name.split("."))
            return found
        if kind in ("function_declaration", "generator_function_declaration"):
            outer = _exported(node)
            return definition_span(outer, outer, body, "function", name)
        if kind in ("method_definition", "abstract_method_signature", "method_signature"):
            return definition_span(node, node, body, "method", name)
        if kind in ("class_declaration", "abstract_class_declaration"):
            outer = _exported(node)
            found = definition_span(outer, outer, body, "class", name)
            self._heritage(node, found, source)
            return found
        if kind == "interface_declaration":
            outer = _exported(node)
            found = definition_span(outer, outer, body, "interface", name)
            for clause in node.named_children:
                if clause.type == "extends_type_clause":
                    found.bases.extend(self._names(clause.named_children, source))
            return found
        if kind == "enum_declaration":
            outer = _exported(node)
            return definition_span(outer, outer, body, "enum", name)
        return None

    def definition_start(self, node: Node) -> int:
        # Decorators belong to what they decorate: an exported class's sit in the export
        # statement, a TypeScript method's just before it in the class body.
        parent = node.parent
        if parent is not None and parent.type == "export_statement":
            return parent.start_byte
        start = node.start_byte
        before = node.prev_named_sibling
        while before is not None and before.type == "decorator":
            start = before.start_byte
            before = before.prev_named_sibling
        return start

    def _bound_function(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        name_node = node.child_by_field_name("name") or node.child_by_field_name("property")
        value = node.child_by_field_name("value")
        if name_node is None or value is None or value.type not in _FUNCTION_VALUES:
            return None
        outer = node
        parent = node.parent
        if (
            node.type == "variable_declarator"
            and parent is not None
            and parent.type in ("lexical_declaration", "variable_declaration")
            and parent.named_child_count == 1
        ):
            outer = _exported(parent)
        kind = "method" if scope.kind in CLASS_LIKE else "function"
        return definition_span(
            outer, outer, value.child_by_field_name("body"), kind, node_text(name_node, source)
        )

    def _heritage(self, node: Node, found: Definition, source: bytes) -> None:
        for heritage in node.named_children:
            if heritage.type != "class_heritage":
                continue
            for clause in heritage.named_children:
                if clause.type == "extends_clause":
                    found.bases.extend(self._names(clause.children_by_field_name("value"), source))
                elif clause.type == "implements_clause":
                    found.interfaces.extend(self._names(clause.named_children, source))
                else:  # plain JS: the heritage holds the extended expression itself
                    found.bases.extend(self._names([clause], source))

    @staticmethod
    def _names(nodes: list[Node], source: bytes) -> list[str]:
        out: list[str] = []
        for item in nodes:
            named = item.child_by_field_name("name") if item.type == "generic_type" else None
            target = dotted_target(node_text(named or item, source))
            if target:
                out.append(target)
        return out

    def call_target(self, node: Node, source: bytes) -> str | None:
        target = call_edge_target(node, source)
        return None if target in _NOT_CALLS else target

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        if node.type == "call_expression":
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            target = _string_content(first, source)
        else:
            target = _string_content(node.child_by_field_name("source"), source)
        return [target] if target else []


class TypeScriptRules(JavaScriptRules):
    language = "typescript"
    query = _JS_QUERY + _TS_EXTRA


class TsxRules(TypeScriptRules):
    language = "tsx"

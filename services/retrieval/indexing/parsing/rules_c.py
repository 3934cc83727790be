"""C and C++: functions, records, C++ classes and namespaces (names joined with ``.``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tree_sitter import Node

from .extract import call_edge_target
from .modnames import module_name
from .rules import CLASS_LIKE, Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_C_QUERY = """
(function_definition) @def
(struct_specifier body: (_)) @def
(union_specifier body: (_)) @def
(enum_specifier body: (_)) @def
(call_expression function: (_) @call)
(preproc_include) @import
(comment) @comment
"""
_CPP_EXTRA = """
(class_specifier body: (_)) @def
(namespace_definition) @def
"""
_RECORD_KINDS = {
    "struct_specifier": "struct",
    "union_specifier": "struct",
    "enum_specifier": "enum",
    "class_specifier": "class",
}
_DECLARATOR_WRAPPERS = frozenset(
    (
        "pointer_declarator",
        "reference_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
    )
)


# ``class TORCH_API Name : Base {``: an export macro between the keyword and the name makes
# the grammar read a function definition; blanking it (same length) keeps every offset.
_EXPORT_MACRO = re.compile(
    rb"\b(?:class|struct)\s+([A-Z_][A-Z0-9_]{2,})\s+(?=[A-Za-z_]\w*\s*(?:[:{]|final\b))"
)


def _blank_export_macros(source: bytes) -> bytes:
    if b"class" not in source and b"struct" not in source:
        return source
    return _EXPORT_MACRO.sub(
        lambda m: m.group(0).replace(m.group(1), b" " * len(m.group(1))), source
    )


def _split_scoped(text: str) -> list[str]:
    """``ns::Cls<T>::f`` -> ["ns", "Cls", "f"]; operators and destructors kept whole."""
    depth = 0
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if text.startswith("operator", i) and depth == 0:
            current.append(text[i:])
            break
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0 and text.startswith("::", i):
            parts.append("".join(current))
            current = []
            i += 2
            continue
        elif depth == 0 and not ch.isspace():
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return [p for p in parts if p]


def _function_declarator(node: Node) -> Node | None:
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        if declarator.type not in _DECLARATOR_WRAPPERS:
            return None
        declarator = declarator.child_by_field_name("declarator") or (
            declarator.named_children[-1] if declarator.named_children else None
        )
    return declarator


class CRules(LanguageRules):
    language = "c"
    query = _C_QUERY

    def prepare(self, source: bytes) -> bytes:
        return _blank_export_macros(source)

    def module_names(
        self, root: Node, path: str, source: bytes, source_roots: Sequence[str]
    ) -> tuple[str, str]:
        # definitions here are global names; the module is only the file
        return module_name(path, self.language, source_roots), ""

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        parent = node.parent
        outer = parent if parent is not None and parent.type == "template_declaration" else node
        body = node.child_by_field_name("body")
        if node.type == "namespace_definition":
            name_node = node.child_by_field_name("name")
            found = definition_span(node, node, body, "namespace", "")
            if name_node is not None:
                found.qualifier = tuple(_split_scoped(node_text(name_node, source)))
            return found
        if node.type == "function_definition":
            declarator = _function_declarator(node)
            inner = declarator.child_by_field_name("declarator") if declarator else None
            if inner is None:
                return None
            parts = _split_scoped(node_text(inner, source))
            if not parts:
                return None
            qualified = len(parts) > 1
            kind = "method" if scope.kind in CLASS_LIKE or qualified else "function"
            found = definition_span(outer, outer, body, kind, parts[-1])
            found.qualifier = tuple(parts[:-1])
            return found
        name_node = node.child_by_field_name("name")
        if name_node is not None:
            parts = _split_scoped(node_text(name_node, source))
        elif parent is not None and parent.type == "type_definition":
            # typedef struct { ... } Name;
            alias = parent.child_by_field_name("declarator")
            parts = [node_text(alias, source)] if alias is not None else []
            outer = parent
        else:
            parts = []
        if not parts:
            return None
        found = definition_span(outer, outer, body, _RECORD_KINDS[node.type], parts[-1])
        found.qualifier = tuple(parts[:-1])
        for child in node.named_children:
            if child.type == "base_class_clause":
                for base in child.named_children:
                    if base.type == "access_specifier":
                        continue
                    target = dotted_target(node_text(base, source))
                    if target:
                        found.bases.append(target)
        return found

    def call_target(self, node: Node, source: bytes) -> str | None:
        return call_edge_target(node, source)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        target = node.child_by_field_name("path")
        if target is None:
            return []
        return [node_text(target, source).strip('<>"')]


class CppRules(CRules):
    language = "cpp"
    query = _C_QUERY + _CPP_EXTRA

"""Rust: items, impl blocks (with methods named ``Type.method``) and ``use`` trees."""

from __future__ import annotations

from tree_sitter import Node

from .extract import call_edge_target
from .rules import Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_QUERY = """
(function_item) @def
(function_signature_item) @def
(struct_item) @def
(union_item) @def
(enum_item) @def
(trait_item) @def
(impl_item) @def
(mod_item body: (_)) @def
(call_expression function: (_) @call)
(use_declaration) @import
(mod_item !body) @import
(line_comment) @comment
(block_comment) @comment
"""
_KINDS = {
    "struct_item": "struct",
    "union_item": "struct",
    "enum_item": "enum",
    "trait_item": "trait",
}
_WRAPPERS = {
    "reference_type": "type",
    "pointer_type": "type",
    "generic_type": "type",
    "dynamic_type": "trait",
    "abstract_type": "trait",
}


def _type_path(node: Node | None, source: bytes) -> str | None:
    """``&Foo<T>`` -> ``Foo``, ``fmt::Display`` -> ``fmt.Display``."""
    while node is not None and node.type in _WRAPPERS:
        node = node.child_by_field_name(_WRAPPERS[node.type])
    if node is None:
        return None
    return dotted_target(node_text(node, source))


def _use_paths(node: Node, prefix: str, source: bytes, out: list[str]) -> None:
    kind = node.type
    if kind == "scoped_use_list":
        path = node.child_by_field_name("path")
        inner = prefix
        if path is not None:
            inner = ".".join(p for p in (prefix, dotted_target(node_text(path, source)) or "") if p)
        listing = node.child_by_field_name("list")
        if listing is not None:
            _use_paths(listing, inner, source, out)
    elif kind == "use_list":
        for child in node.named_children:
            _use_paths(child, prefix, source, out)
    elif kind == "use_as_clause":
        path = node.child_by_field_name("path")
        if path is not None:
            _use_paths(path, prefix, source, out)
    elif kind == "use_wildcard":
        head = node.named_children[0] if node.named_children else None
        text = dotted_target(node_text(head, source)) if head is not None else None
        out.append(".".join(p for p in (prefix, text or "") if p))
    elif kind == "self":
        if prefix:
            out.append(prefix)
    else:
        text = dotted_target(node_text(node, source))
        if text:
            out.append(".".join(p for p in (prefix, text) if p))


class RustRules(LanguageRules):
    language = "rust"
    query = _QUERY

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        body = node.child_by_field_name("body")
        outer_start = node
        sibling = node.prev_named_sibling
        while sibling is not None and sibling.type == "attribute_item":
            outer_start = sibling
            sibling = sibling.prev_named_sibling
        if node.type == "impl_item":
            owner = _type_path(node.child_by_field_name("type"), source)
            if not owner:
                return None
            owner_name = owner.rsplit(".", 1)[-1]
            trait = _type_path(node.child_by_field_name("trait"), source)
            found = self._span(outer_start, node, body, "impl", owner_name)
            found.qualified_override = ".".join(
                p for p in (scope.prefix, owner_name, "impl", (trait or "").rsplit(".", 1)[-1]) if p
            )
            found.child_prefix = ".".join(p for p in (scope.prefix, owner_name) if p)
            if trait:
                found.interfaces.append(trait)
            return found
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        name = node_text(name_node, source)
        if node.type == "mod_item":
            return self._span(node, node, body, "namespace", name)
        if node.type in ("function_item", "function_signature_item"):
            kind = "method" if scope.kind in ("impl", "trait") else "function"
            return self._span(outer_start, node, body, kind, name)
        found = self._span(outer_start, node, body, _KINDS[node.type], name)
        if node.type == "trait_item":
            bounds = node.child_by_field_name("bounds")
            for bound in bounds.named_children if bounds is not None else []:
                target = _type_path(bound, source)
                if target:
                    found.bases.append(target)
        return found

    @staticmethod
    def _span(outer: Node, node: Node, body: Node | None, kind: str, name: str) -> Definition:
        found = definition_span(node, node, body, kind, name)
        # attributes (#[derive], #[test]) belong to the item's text but not its signature
        found.start_byte = outer.start_byte
        found.start_row = outer.start_point.row
        return found

    def call_target(self, node: Node, source: bytes) -> str | None:
        if node.type == "generic_function":  # foo::<T>()
            inner = node.child_by_field_name("function")
            node = inner if inner is not None else node
        return call_edge_target(node, source)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        if node.type == "mod_item":  # ``mod tcp;`` pulls in the file tcp.rs
            name = node.child_by_field_name("name")
            return [f"{module}.{node_text(name, source)}"] if name is not None else []
        argument = node.child_by_field_name("argument")
        out: list[str] = []
        if argument is not None:
            _use_paths(argument, "", source, out)
        return out

"""Ruby: classes and methods; modules are namespaces (``Billing.Retry.run``)."""

from __future__ import annotations

from collections.abc import Sequence

from tree_sitter import Node

from .modnames import module_name
from .rules import CLASS_LIKE, Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target

_QUERY = """
(class) @def
(module) @def
(method) @def
(singleton_method) @def
(call) @call
(program
  (call
    !receiver
    method: (identifier) @_require
    (#match? @_require "^(require|require_relative|load)$")) @import)
(comment) @comment
"""
_IMPORT_METHODS = frozenset(("require", "require_relative", "load"))
_MIXIN_METHODS = frozenset(("include", "prepend"))


def _name_parts(node: Node | None, source: bytes) -> list[str]:
    if node is None:
        return []
    target = dotted_target(node_text(node, source))
    return target.split(".") if target else []


class RubyRules(LanguageRules):
    language = "ruby"
    query = _QUERY

    def module_names(
        self, root: Node, path: str, source: bytes, source_roots: Sequence[str]
    ) -> tuple[str, str]:
        # definitions here are global names; the module is only the file
        return module_name(path, self.language, source_roots), ""

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        if node.type in ("method", "singleton_method"):
            params = node.child_by_field_name("parameters")
            kind = "method" if scope.kind in CLASS_LIKE else "function"
            found = definition_span(node, node, None, kind, node_text(name_node, source))
            found.sig_end = (params or name_node).end_byte
            return found
        parts = _name_parts(name_node, source)
        if not parts:
            return None
        if node.type == "module":
            found = definition_span(node, node, None, "namespace", parts[-1])
            found.qualifier = tuple(parts[:-1])
            return found
        superclass = node.child_by_field_name("superclass")
        found = definition_span(node, node, None, "class", parts[-1])
        found.qualifier = tuple(parts[:-1])
        found.sig_end = (superclass or name_node).end_byte
        if superclass is not None and superclass.named_children:
            base = dotted_target(node_text(superclass.named_children[0], source))
            if base:
                found.bases.append(base)
        body = node.child_by_field_name("body")
        for stmt in body.named_children if body is not None else []:
            if stmt.type != "call" or stmt.child_by_field_name("receiver") is not None:
                continue
            method = stmt.child_by_field_name("method")
            args = stmt.child_by_field_name("arguments")
            if method is None or args is None or node_text(method, source) not in _MIXIN_METHODS:
                continue
            for arg in args.named_children:
                target = dotted_target(node_text(arg, source))
                if target:
                    found.interfaces.append(target)
        return found

    def use_line(self, node: Node) -> int:
        # The capture is the whole call, block included: the method's name is the use.
        method = node.child_by_field_name("method")
        return (method or node).start_point.row + 1

    def call_target(self, node: Node, source: bytes) -> str | None:
        method = node.child_by_field_name("method")
        if method is None:
            return None
        name = node_text(method, source)
        receiver = node.child_by_field_name("receiver")
        if receiver is None:
            return None if name in _IMPORT_METHODS or name in _MIXIN_METHODS else name
        return dotted_target(node_text(receiver, source) + "." + name)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        method = node.child_by_field_name("method")
        args = node.child_by_field_name("arguments")
        if method is None or args is None or not args.named_children:
            return []
        first = args.named_children[0]
        if first.type != "string":
            return []
        target = node_text(first, source).strip("'\"")
        if node_text(method, source) == "require_relative" and not target.startswith("."):
            target = "./" + target  # marks it as relative to the requiring file
        return [target] if target else []

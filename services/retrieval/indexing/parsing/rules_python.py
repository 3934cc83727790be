"""Python: modules, classes, functions and methods, with their docstrings."""

from __future__ import annotations

from tree_sitter import Node

from .extract import call_edge_target
from .rules import CLASS_LIKE, Definition, LanguageRules, Scope, definition_span, node_text
from .text import dotted_target, python_string_value

_QUERY = """
(class_definition) @def
(function_definition) @def
(call function: (_) @call)
(import_statement) @import
(import_from_statement) @import
"""


def _docstring(block: Node | None, source: bytes) -> str | None:
    if block is None:
        return None
    for child in block.named_children:
        if child.type == "comment":
            continue
        if child.type == "expression_statement" and child.named_child_count == 1:
            string = child.named_children[0]
            if string.type == "string":
                return python_string_value(node_text(string, source)) or None
        return None
    return None


def _relative_base(module: str, path: str, dots: int) -> str:
    # ``from . import x`` inside pkg/mod.py means pkg.x; inside pkg/__init__.py too.
    parts = module.split(".")
    is_package = path.endswith("__init__.py") or path.endswith("__init__.pyi")
    drop = dots - 1 if is_package else dots
    return ".".join(parts[: len(parts) - drop]) if drop < len(parts) else ""


class PythonRules(LanguageRules):
    language = "python"
    query = _QUERY
    comment_docs = False

    def module_docstring(self, root: Node, source: bytes) -> str | None:
        return _docstring(root, source)

    def describe(self, node: Node, scope: Scope, source: bytes) -> Definition | None:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return None
        parent = node.parent
        outer = parent if parent is not None and parent.type == "decorated_definition" else node
        body = node.child_by_field_name("body")
        name = node_text(name_node, source)
        if node.type == "class_definition":
            found = definition_span(outer, node, body, "class", name)
            supers = node.child_by_field_name("superclasses")
            if supers is not None:
                for arg in supers.named_children:
                    if arg.type == "keyword_argument":
                        continue  # metaclass=..., not a base
                    base = dotted_target(node_text(arg, source))
                    if base:
                        found.bases.append(base)
        else:
            kind = "method" if scope.kind in CLASS_LIKE else "function"
            found = definition_span(outer, node, body, kind, name)
        found.docstring = _docstring(body, source)
        return found

    def call_target(self, node: Node, source: bytes) -> str | None:
        return call_edge_target(node, source)

    def imports(self, node: Node, source: bytes, module: str, path: str) -> list[str]:
        targets: list[str] = []
        if node.type == "import_statement":
            for name in node.children_by_field_name("name"):
                if name.type == "aliased_import":
                    inner = name.child_by_field_name("name")
                    if inner is not None:
                        targets.append(node_text(inner, source))
                else:
                    targets.append(node_text(name, source))
            return targets
        module_node = node.child_by_field_name("module_name")
        if module_node is None:
            return targets
        if module_node.type == "relative_import":
            dots = 0
            rest = ""
            for child in module_node.named_children:
                if child.type == "import_prefix":
                    dots = node_text(child, source).count(".")
                else:
                    rest = node_text(child, source)
            base = _relative_base(module, path, dots)
            origin = ".".join(p for p in (base, rest) if p)
        else:
            origin = node_text(module_node, source)
        names = node.children_by_field_name("name")
        if not names or any(c.type == "wildcard_import" for c in node.named_children):
            return [origin] if origin else []
        for name in names:
            inner = name.child_by_field_name("name") if name.type == "aliased_import" else name
            if inner is not None:
                targets.append(".".join(p for p in (origin, node_text(inner, source)) if p))
        return targets

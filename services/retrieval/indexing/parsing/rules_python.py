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
(decorator) @call
(assignment left: (identifier)) @bind
(parameters (identifier) @bind)
(default_parameter) @bind
(typed_parameter) @bind
(typed_default_parameter) @bind
(for_statement left: (identifier) @bind)
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


def _annotated_type(node: Node | None, source: bytes) -> str | None:
    """The class an annotation names: ``Foo``, ``mod.Foo``, ``"Foo"``, ``Optional[Foo]``
    or ``Foo | None``; None for anything else (containers, unions of several types)."""
    if node is None:
        return None
    if node.type == "type" and node.named_child_count == 1:
        return _annotated_type(node.named_children[0], source)
    if node.type in ("identifier", "attribute"):
        return _plain_dotted(node_text(node, source))
    if node.type == "string":
        return _plain_dotted(python_string_value(node_text(node, source)) or "")
    if node.type == "generic_type" and node.named_child_count == 2:
        head, params = node.named_children
        if node_text(head, source) in ("Optional", "typing.Optional", "t.Optional"):
            inner = params.named_children
            return _annotated_type(inner[0], source) if len(inner) == 1 else None
        return None
    if node.type == "binary_operator":
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if right is not None and right.type == "none":
            return _annotated_type(left, source)
        if left is not None and left.type == "none":
            return _annotated_type(right, source)
    return None


def _plain_dotted(text: str) -> str | None:
    target = dotted_target(text)
    return target if target and target == text.strip() else None


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

    def definition_start(self, node: Node) -> int:
        parent = node.parent
        if parent is not None and parent.type == "decorated_definition":
            return parent.start_byte
        return node.start_byte

    def call_target(self, node: Node, source: bytes) -> str | None:
        if node.type == "decorator":
            # `@app.route("/")` is a call, captured as one; `@login_required` and
            # `@functools.cache` run the named callable with the function all the same.
            expression = node.named_children[0] if node.named_child_count else None
            if expression is None or expression.type not in ("identifier", "attribute"):
                return None
            return call_edge_target(expression, source)
        return call_edge_target(node, source)

    def call_receiver(self, node: Node, source: bytes) -> str | None:
        if node.type == "decorator":
            node = node.named_children[0]
        if node.type != "attribute":
            return None
        receiver = node.child_by_field_name("object")
        if receiver is None or receiver.type != "identifier":
            return None
        return node_text(receiver, source)

    def binding(self, node: Node, source: bytes) -> tuple[str, str] | None:
        bound: str | None = None
        if node.type == "identifier":  # an untyped parameter, a loop variable
            name: Node | None = node
        elif node.type == "assignment":
            name = node.child_by_field_name("left")
            annotation = node.child_by_field_name("type")
            value = node.child_by_field_name("right")
            if annotation is not None:
                bound = _annotated_type(annotation, source)
            elif value is not None and value.type == "call":
                # `x = Foo(...)`: whether Foo is a class is for the resolver to say.
                callee = value.child_by_field_name("function")
                bound = _plain_dotted(node_text(callee, source)) if callee is not None else None
        else:  # default_parameter, typed_parameter, typed_default_parameter
            name = node.child_by_field_name("name")
            if name is None and node.named_child_count:
                name = node.named_children[0]  # typed_parameter keeps its name unlabelled
            bound = _annotated_type(node.child_by_field_name("type"), source)
        if name is None or name.type != "identifier":
            return None
        # An untyped name still hides the same name of an enclosing scope or an import.
        return node_text(name, source), bound or ""

    def imported_names(
        self, node: Node, source: bytes, module: str, path: str
    ) -> list[tuple[str, str]]:
        if node.type != "import_from_statement":
            return []  # `import a.b` binds a module, whose members resolve as today
        origin = self._from_origin(node, source, module, path)
        found: list[tuple[str, str]] = []
        for name in node.children_by_field_name("name"):
            inner = name.child_by_field_name("name") if name.type == "aliased_import" else name
            alias = name.child_by_field_name("alias") if name.type == "aliased_import" else None
            if inner is None:
                continue
            imported = node_text(inner, source)
            local = node_text(alias, source) if alias is not None else imported
            if "." not in local:
                found.append((local, ".".join(p for p in (origin, imported) if p)))
        return found

    def _from_origin(self, node: Node, source: bytes, module: str, path: str) -> str:
        module_node = node.child_by_field_name("module_name")
        if module_node is None:
            return ""
        if module_node.type != "relative_import":
            return node_text(module_node, source)
        dots = 0
        rest = ""
        for child in module_node.named_children:
            if child.type == "import_prefix":
                dots = node_text(child, source).count(".")
            else:
                rest = node_text(child, source)
        base = _relative_base(module, path, dots)
        return ".".join(p for p in (base, rest) if p)

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
        if node.child_by_field_name("module_name") is None:
            return targets
        origin = self._from_origin(node, source, module, path)
        names = node.children_by_field_name("name")
        if not names or any(c.type == "wildcard_import" for c in node.named_children):
            return [origin] if origin else []
        for name in names:
            inner = name.child_by_field_name("name") if name.type == "aliased_import" else name
            if inner is not None:
                targets.append(".".join(p for p in (origin, node_text(inner, source)) if p))
        return targets

"""Uses as the parser records them: decorators are uses of the decorated definition, every
use keeps its line, and a `recv.member` call carries the receiver's type when the file
states it (a constructor, an annotation, an import) and nothing when it does not."""

from __future__ import annotations

from retrieval.indexing.parsing import Edge, ParsedFile, parse_file

APP = b"""\
from flasky import Flask, Blueprint as BP
from shop.app import app as application
import flasky.testing

site = Flask(__name__)
admin: BP = make_blueprint()
unknown = make_app()


@site.route("/")
@login_required
@flasky.testing.mark
def index(site):
    return site.route("/shadowed")


@application.route("/items")
def items(a: Flask, b: "Flask" = None, c: Optional[BP] = None, *rest, d: Flask | None, **kw):
    local = Flask("x")
    local.route("/one")
    local.route(
        "/two"
    )
    a.route("/a")
    b.route("/b")
    c.route("/c")
    d.route("/d")
    unknown.route("/u")
    admin.route("/admin")
    rest.route("/rest")
    self_made().route("/chain")


def later():
    return declared_after.route("/late")


declared_after = Flask("late")


class View:
    def get(self, req: Request):
        self.render()
        req.args.get("q")
"""


def _parse(path: str, source: bytes) -> ParsedFile:
    parsed = parse_file(path, source)
    assert parsed is not None
    return parsed


def _calls(parsed: ParsedFile) -> dict[tuple[str, str], Edge]:
    """Calls by (source, name); the first edge when a name has several receivers."""
    found: dict[tuple[str, str], Edge] = {}
    for edge in parsed.edges:
        if edge.kind == "calls":
            found.setdefault((edge.src, edge.dst_name), edge)
    return found


def test_decorators_are_uses_by_the_definition_they_decorate() -> None:
    calls = _calls(_parse("shop/views.py", APP))
    decorator = calls[("shop.views.index", "site.route")]
    assert decorator.lines == (10,) and decorator.receiver == "flasky.Flask"
    assert calls[("shop.views.index", "login_required")].lines == (11,)
    assert calls[("shop.views.index", "flasky.testing.mark")].lines == (12,)
    # The module makes the app and defines the function; it does not run the decorators.
    assert ("shop.views", "site.route") not in calls
    assert ("shop.views", "login_required") not in calls


def test_a_decorator_sees_the_enclosing_scope_not_the_functions_parameters() -> None:
    parsed = _parse("shop/views.py", APP)
    uses = [
        (e.lines, e.receiver)
        for e in parsed.edges
        if (e.src, e.dst_name) == ("shop.views.index", "site.route")
    ]
    # The decorator runs outside index, where `site` is the module's Flask; inside, the
    # untyped parameter `site` hides it, and nothing says what that one is.
    assert uses == [((10,), "flasky.Flask"), ((14,), None)]
    src = b"def f(x: A):\n    x.go()\n    g()\n    x.go()\n"
    assert [(e.dst_name, e.lines) for e in _parse("m.py", src).edges if e.kind == "calls"] == [
        ("x.go", (2, 4)),
        ("g", (3,)),
    ]


def test_every_use_keeps_its_line_one_edge_per_name_and_node() -> None:
    calls = _calls(_parse("shop/views.py", APP))
    local = calls[("shop.views.items", "local.route")]
    assert local.lines == (20, 21)
    src = b"def f():\n    g(); g()\n    g()\n    h.g()\n"
    edges = [e for e in _parse("m.py", src).edges if e.kind == "calls"]
    assert [(e.dst_name, e.lines) for e in edges] == [("g", (2, 3)), ("h.g", (4,))]
    imports = {e.dst_name: e.lines for e in _parse("m.py", APP).edges if e.kind == "imports"}
    assert imports["flasky.Flask"] == (1,) and imports["flasky.testing"] == (3,)


def test_receivers_typed_by_constructors_annotations_and_imports() -> None:
    calls = _calls(_parse("shop/views.py", APP))
    receivers = {
        name: calls[("shop.views.items", f"{name}.route")].receiver
        for name in ("local", "a", "b", "c", "d", "unknown", "admin", "rest", "application")
    }
    assert receivers == {
        "local": "flasky.Flask",  # local = Flask("x"), Flask imported from flasky
        "a": "flasky.Flask",  # a: Flask
        "b": "flasky.Flask",  # b: "Flask" = None
        "c": "flasky.Blueprint",  # Optional[BP], BP an alias of flasky.Blueprint
        "d": "flasky.Flask",  # Flask | None
        "unknown": "make_app",  # a call the resolver may find is no class
        "admin": "flasky.Blueprint",  # admin: BP = ...
        "rest": None,  # *rest: a name, no type
        "application": "shop.app.app",  # imported: its module says what it is
    }
    # An expression receiver has no variable to type; the name stays as today.
    assert calls[("shop.views.items", "route")].receiver is None
    # A module-level name bound after the function that uses it is still known.
    assert calls[("shop.views.later", "declared_after.route")].receiver == "flasky.Flask"
    view = calls[("shop.views.View.get", "self.render")]
    assert view.receiver is None  # the enclosing class resolves self, as before
    assert ("shop.views.View.get", "req.args.get") in calls
    assert calls[("shop.views.View.get", "req.args.get")].receiver is None  # two hops


def test_module_bindings_list_the_typed_module_names_only() -> None:
    parsed = _parse("shop/views.py", APP)
    assert dict(parsed.bindings) == {
        "site": "flasky.Flask",
        "admin": "flasky.Blueprint",
        "unknown": "make_app",
        "declared_after": "flasky.Flask",
    }
    assert dict(_parse("m.py", b"x = 1\ny = None\n").bindings) == {}


def test_lines_and_receivers_do_not_take_part_in_equality() -> None:
    assert Edge("m.f", "g", "calls", (3,), "T") == Edge("m.f", "g", "calls")
    assert hash(Edge("m.f", "g", "calls", (3,))) == hash(Edge("m.f", "g", "calls"))


def test_typescript_and_javascript_decorators_are_uses_of_what_they_decorate() -> None:
    source = (
        b"@Injectable\nexport class Service {\n  @log\n  run() { this.go(); }\n}\n"
        b"@ng.Component()\nclass Panel {}\n"
    )
    for path in ("web/service.ts", "web/service.js"):
        calls = _calls(_parse(path, source))
        assert calls[("web.service.Service", "Injectable")].lines == (1,), path
        assert calls[("web.service.Service.run", "log")].lines == (3,), path
        assert calls[("web.service.Panel", "ng.Component")].lines == (6,), path


def test_java_and_ruby_uses_are_on_the_names_line_not_the_calls_last() -> None:
    java = (
        b"class A {\n  void f() {\n    foo\n      .bar(\n        1);\n    new B(\n    );\n  }\n}\n"
    )
    assert {(e.dst_name, e.lines) for e in _parse("A.java", java).edges if e.kind == "calls"} == {
        ("foo.bar", (4,)),
        ("B", (6,)),
    }
    ruby = b"def f\n  items.each do |x|\n    x.go\n  end\nend\n"
    assert {(e.dst_name, e.lines) for e in _parse("a.rb", ruby).edges if e.kind == "calls"} == {
        ("items.each", (2,)),
        ("x.go", (3,)),
    }


def test_bases_are_on_the_signatures_line() -> None:
    source = b"@dataclass\nclass A(\n    Base,\n):\n    pass\n"
    inherits = [e for e in _parse("m.py", source).edges if e.kind == "inherits"]
    assert [(e.dst_name, e.lines) for e in inherits] == [("Base", (2,))]

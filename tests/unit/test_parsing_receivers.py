"""Typed receivers resolve to their class's member or a base's: `app.route` lands on
`Scaffold.route` when the file or the module it imports `app` from says what `app` is,
and stays unresolved (as before) when nothing does."""

from __future__ import annotations

from retrieval.indexing.parsing import ParsedFile, ResolvedEdge, parse_file, resolve_parsed
from tests.flasklike import FILES, ROUTE_USES

ROUTE = "flasky.scaffold.Scaffold.route"


def _parse(files: dict[str, str]) -> list[ParsedFile]:
    parsed = [parse_file(path, text.encode()) for path, text in files.items()]
    assert all(p is not None for p in parsed)
    return [p for p in parsed if p is not None]


def _uses_of(parsed: list[ParsedFile], target: str) -> list[tuple[str, int, str]]:
    """(path, line, source) of every use that resolves to `target`."""
    lines = {(f.path, e.src, e.dst_name, e.receiver): e.lines for f in parsed for e in f.edges}
    edges_in_order = [(f.path, e) for f in parsed for e in f.edges]
    resolved: list[ResolvedEdge] = resolve_parsed(parsed)
    found: list[tuple[str, int, str]] = []
    for (path, edge), hit in zip(edges_in_order, resolved, strict=True):
        assert (hit.src_path, hit.src, hit.dst_name) == (path, edge.src, edge.dst_name)
        if hit.dst == target and hit.kind == "calls":
            found.extend(
                (path, line, edge.src)
                for line in lines[(path, edge.src, edge.dst_name, edge.receiver)]
            )
    return sorted(found)


def test_every_route_use_of_the_flask_like_fixture_resolves_with_its_line() -> None:
    assert _uses_of(_parse(FILES), ROUTE) == sorted(ROUTE_USES)


def test_a_receiver_nothing_types_stays_unresolved() -> None:
    parsed = _parse(FILES)
    resolved = {(r.src, r.dst_name): r.dst for r in resolve_parsed(parsed)}
    assert resolved[("shop.views.decoys", "unknown.route")] is None
    # A typed receiver of another class reaches that class's member, not Scaffold's.
    assert resolved[("shop.views.decoys", "router.route")] == "shop.views.Router.route"


def test_an_import_path_beats_a_second_class_of_the_same_name() -> None:
    """With another `Flask` in the repository the bare name is ambiguous; the receiver
    is named through the import (`flasky.Flask`), which the package re-exports."""
    files = {**FILES, "legacy/flask.py": "class Flask:\n    def route(self, rule):\n        pass\n"}
    assert _uses_of(_parse(files), ROUTE) == sorted(ROUTE_USES)
    assert _uses_of(_parse(files), "legacy.flask.Flask.route") == []


def test_a_member_the_class_lacks_falls_back_to_the_name_as_before() -> None:
    files = {
        "pkg/box.py": "class Box:\n    pass\n\n\ndef open_box():\n    pass\n",
        "pkg/use.py": "from pkg.box import Box\n\n\ndef f():\n    b = Box()\n    b.open_box()\n",
    }
    resolved = {(r.src, r.dst_name): r.dst for r in resolve_parsed(_parse(files))}
    # Box has no open_box: the receiver says nothing more, the call resolves as before
    # (here: through the import, to the module's function of that name).
    assert resolved[("pkg.use.f", "b.open_box")] == "pkg.box.open_box"


def test_self_reaches_a_method_its_class_inherits() -> None:
    files = {
        "pkg/__init__.py": "from .base import Base\n",
        "pkg/base.py": "class Base:\n    def save(self):\n        pass\n",
        "pkg/other.py": "class Other:\n    def save(self):\n        pass\n",
        "app/child.py": (
            "from pkg import Base\n\n\nclass Child(Base):\n"
            "    def run(self):\n        self.save()\n"
        ),
    }
    resolved = {(r.src, r.dst_name): r.dst for r in resolve_parsed(_parse(files))}
    # Two classes define save and the file imports neither module: the bare name is
    # ambiguous, the base is not.
    assert resolved[("app.child.Child.run", "self.save")] == "pkg.base.Base.save"


def test_a_cycle_of_re_exports_ends_unresolved() -> None:
    files = {
        "a/__init__.py": "from b import thing\n",
        "b/__init__.py": "from a import thing\n",
        "c.py": "from a import thing\n\n\ndef f():\n    thing.go()\n",
    }
    resolved = {(r.src, r.dst_name): r.dst for r in resolve_parsed(_parse(files))}
    assert resolved[("c.f", "thing.go")] is None


def test_a_cycle_of_bases_ends_unresolved() -> None:
    files = {
        "m.py": (
            "class A(B):\n    pass\n\n\nclass B(A):\n    pass\n\n\ndef f(a: A):\n    a.missing()\n"
        ),
    }
    resolved = {(r.src, r.dst_name): r.dst for r in resolve_parsed(_parse(files))}
    assert resolved[("m.f", "a.missing")] is None

"""Edge resolution order: enclosing type, same file, imported files, unique name."""

from __future__ import annotations

import pytest

from retrieval.indexing.parsing import (
    CodeParser,
    ParsedFile,
    ResolvedEdge,
    resolve_edges,
    resolve_imports,
    resolve_parsed,
)

FILES: dict[str, bytes] = {
    "src/billing/retry.py": b"""\
from billing.clock import now
from billing import policy as pol
import json


def helper():
    pass


class Backoff(Base):
    def compute(self):
        self.scale()
        helper()
        now()
        pol.check()
        unique_fn()
        dup()
        json.dumps({})
        self.inherited()

    def scale(self):
        pass
""",
    "src/billing/clock.py": b"def now():\n    pass\n\n\ndef helper():\n    pass\n",
    "src/billing/policy.py": b"def check():\n    pass\n",
    "src/billing/misc.py": b"def unique_fn():\n    pass\n\n\ndef dup():\n    pass\n",
    "src/billing/other.py": b"def dup():\n    pass\n\n\ndef now():\n    pass\n",
    "src/billing/base.py": b"class Base:\n    def inherited(self):\n        pass\n",
    "internal/server/server.go": b"""\
package server

import "example.com/app/internal/util"

func (s *Server) Handle() {
\ts.retry()
\thelper()
\tutil.Do()
}
""",
    "internal/server/types.go": b"package server\n\ntype Server struct{}\n\n"
    b"func (s *Server) retry() {}\n",
    "internal/server/helpers.go": b"package server\n\nfunc helper() {}\n",
    "internal/util/util.go": b"package util\n\nfunc Do() {}\n",
    "cmd/tool/main.go": b"package main\n\nfunc helper() {}\n",
    "src/app/api.ts": b"export function fetchUser(id: string) { return id; }\n",
    "src/app/main.ts": b"""\
import { fetchUser } from './api';
export class Page extends Base {
  load() { fetchUser('1'); this.render(); }
  render() {}
}
""",
    "java/com/y/B.java": b"package com.y;\n"
    b"public class B { public static B make() { return null; } }\n",
    "java/com/x/A.java": b"""\
package com.x;
import com.y.B;
public class A extends B implements Runnable {
  public void run() { B.make(); go(); }
  void go() {}
}
""",
}


@pytest.fixture(scope="module")
def parsed() -> list[ParsedFile]:
    parser = CodeParser()
    out = [parser.parse(path, source) for path, source in FILES.items()]
    assert all(p is not None for p in out)
    return [p for p in out if p is not None]


@pytest.fixture(scope="module")
def resolved(parsed: list[ParsedFile]) -> list[ResolvedEdge]:
    return resolve_parsed(parsed)


def _dst(resolved: list[ResolvedEdge], src: str, dst_name: str) -> tuple[str | None, str | None]:
    hits = [r for r in resolved if r.src == src and r.dst_name == dst_name]
    assert len(hits) == 1, (src, dst_name, hits)
    return hits[0].dst, hits[0].dst_path


def test_python_resolution_order(resolved: list[ResolvedEdge]) -> None:
    src = "billing.retry.Backoff.compute"
    # the enclosing class first
    assert _dst(resolved, src, "self.scale") == (
        "billing.retry.Backoff.scale",
        "src/billing/retry.py",
    )
    # the same file beats clock.py's helper
    assert _dst(resolved, src, "helper") == ("billing.retry.helper", "src/billing/retry.py")
    # an imported module beats other.py's now
    assert _dst(resolved, src, "now") == ("billing.clock.now", "src/billing/clock.py")
    # an aliased module import still resolves through the imported file
    assert _dst(resolved, src, "pol.check") == ("billing.policy.check", "src/billing/policy.py")
    # not imported, but unique in the repository
    assert _dst(resolved, src, "unique_fn") == ("billing.misc.unique_fn", "src/billing/misc.py")
    # inherited members fall back to the unique bare name
    assert _dst(resolved, src, "self.inherited") == (
        "billing.base.Base.inherited",
        "src/billing/base.py",
    )
    # ambiguous and external names stay unresolved
    assert _dst(resolved, src, "dup") == (None, None)
    assert _dst(resolved, src, "json.dumps") == (None, None)
    assert _dst(resolved, "billing.retry.Backoff", "Base") == (
        "billing.base.Base",
        "src/billing/base.py",
    )


def test_import_edges(resolved: list[ResolvedEdge]) -> None:
    assert _dst(resolved, "billing.retry", "billing.clock.now") == (
        "billing.clock.now",
        "src/billing/clock.py",
    )
    assert _dst(resolved, "billing.retry", "billing.policy") == (
        "billing.policy",
        "src/billing/policy.py",
    )
    assert _dst(resolved, "billing.retry", "json") == (None, None)
    assert _dst(resolved, "server", "example.com/app/internal/util") == (
        "util",
        "internal/util/util.go",
    )
    assert _dst(resolved, "app.main", "./api") == ("app.api", "src/app/api.ts")
    assert _dst(resolved, "com.x", "com.y.B") == ("com.y.B", "java/com/y/B.java")


def test_contains_edges_resolve_in_place(resolved: list[ResolvedEdge]) -> None:
    assert _dst(resolved, "billing.retry", "billing.retry.Backoff") == (
        "billing.retry.Backoff",
        "src/billing/retry.py",
    )


def test_go_receiver_and_package(resolved: list[ResolvedEdge]) -> None:
    src = "server.Server.Handle"
    # the receiver's method lives in another file of the same package
    assert _dst(resolved, src, "s.retry") == ("server.Server.retry", "internal/server/types.go")
    # same package beats cmd/tool's helper, which makes the bare name ambiguous
    assert _dst(resolved, src, "helper") == ("server.helper", "internal/server/helpers.go")
    assert _dst(resolved, src, "util.Do") == ("util.Do", "internal/util/util.go")


def test_typescript_and_java(resolved: list[ResolvedEdge]) -> None:
    assert _dst(resolved, "app.main.Page.load", "fetchUser") == (
        "app.api.fetchUser",
        "src/app/api.ts",
    )
    assert _dst(resolved, "app.main.Page.load", "this.render") == (
        "app.main.Page.render",
        "src/app/main.ts",
    )
    assert _dst(resolved, "app.main.Page", "Base") == (
        "billing.base.Base",  # unique in the repository, whatever the language
        "src/billing/base.py",
    )
    assert _dst(resolved, "com.x.A.run", "B.make") == ("com.y.B.make", "java/com/y/B.java")
    assert _dst(resolved, "com.x.A.run", "go") == ("com.x.A.go", "java/com/x/A.java")
    assert _dst(resolved, "com.x.A", "B") == ("com.y.B", "java/com/y/B.java")
    assert _dst(resolved, "com.x.A", "Runnable") == (None, None)


def test_resolve_imports_and_explicit_imports(parsed: list[ParsedFile]) -> None:
    nodes = {p.path: p.nodes for p in parsed}
    edges = {p.path: p.edges for p in parsed}
    imports = resolve_imports(nodes, edges)
    assert imports["src/billing/retry.py"] == ["src/billing/clock.py", "src/billing/policy.py"]
    assert set(imports["internal/server/server.go"]) == {
        "internal/util/util.go",
        "internal/server/helpers.go",
        "internal/server/types.go",
    }
    # without the import, `now` is ambiguous between clock.py and other.py
    no_imports: dict[str, list[str]] = {path: [] for path in nodes}
    result = resolve_edges(nodes, edges, no_imports)
    now = [r for r in result if r.src == "billing.retry.Backoff.compute" and r.dst_name == "now"]
    assert [(r.dst, r.dst_path) for r in now] == [(None, None)]


def test_every_edge_is_reported_once(
    parsed: list[ParsedFile], resolved: list[ResolvedEdge]
) -> None:
    assert len(resolved) == sum(len(p.edges) for p in parsed)

"""How retrieval judges a stored anchor against the nodes of its qualified name (pure logic;
the database half is tests/integration/test_commons_anchors.py)."""

from __future__ import annotations

from retrieval.anchors import Node, Stored, bare_name, body_hash, judge, signature_hash

SIG = signature_hash("def f(a: int) -> int")
BODY = body_hash("def f(a: int) -> int:\n    return a\n")
ANCHOR = Stored("a1", 7, "pkg.mod.f", "pkg/mod.py", SIG, BODY)


def _node(path: str = "pkg/mod.py", sig: str = SIG, body: str = BODY) -> Node:
    return Node(7, "h/o/n", "pkg.mod.f", path, 1, 2, "function", sig, body, "c0ffee", 3)


def test_the_same_symbol_is_fresh_changed_or_moved_by_its_hashes_and_file() -> None:
    assert judge(ANCHOR, [_node()])[0] == "fresh"
    assert judge(ANCHOR, [_node(body=body_hash("other"))])[0] == "body_changed"
    # A new signature is a new body too: the signature is what is said.
    changed = _node(sig=signature_hash("def f(a: int, b: int)"), body=body_hash("x"))
    assert judge(ANCHOR, [changed])[0] == "signature_changed"
    assert judge(ANCHOR, [_node(path="pkg/other.py")]) == ("moved", _node(path="pkg/other.py"))
    # The node in the anchor's own file wins over one of the same name elsewhere.
    elsewhere = _node(path="a/first.py", body=body_hash("other"))
    assert judge(ANCHOR, [elsewhere, _node()])[0] == "fresh"
    assert judge(ANCHOR, []) == ("orphaned", None)


def test_hashes_and_names() -> None:
    # Reflowing a parameter list keeps the signature; any change to the text is a new body.
    assert signature_hash("def f(a,\n      b)") == signature_hash("def f(a, b)")
    assert body_hash("x ") != body_hash("x")
    assert bare_name("pkg.mod.Class.method#2") == "method"
    assert bare_name("main") == "main"

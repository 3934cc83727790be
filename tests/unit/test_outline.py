"""retrieval.outline.nest: symbols under their parents, in line order; overloads keep
their children on the first definition; an orphan (its parent left out) is top level."""

from __future__ import annotations

from retrieval.outline import nest


def _row(qname: str, start: int, end: int, parent: str | None, kind: str = "method") -> dict:
    return {
        "name": qname.rsplit(".", 1)[-1],
        "qualified_name": qname,
        "kind": kind,
        "signature": "",
        "start_line": start,
        "end_line": end,
        "parent_qualified_name": parent,
    }


def test_nesting_overloads_and_orphans() -> None:
    rows = [
        _row("m.A", 1, 20, "m", "class"),
        _row("m.A.f", 2, 5, "m.A"),
        _row("m.A.Inner", 6, 12, "m.A", "class"),
        _row("m.A.Inner.g", 7, 8, "m.A.Inner"),
        _row("m.A.f", 13, 15, "m.A"),  # an overload of f
        _row("m.h", 21, 22, "m", "function"),
        _row("m.gone.k", 23, 24, "m.gone"),
    ]
    roots = nest(rows)
    assert [s.qualified_name for s in roots] == ["m.A", "m.h", "m.gone.k"]
    a = roots[0]
    assert [(s.name, s.start_line) for s in a.children] == [("f", 2), ("Inner", 6), ("f", 13)]
    assert [s.name for s in a.children[1].children] == ["g"]
    assert nest([]) == []

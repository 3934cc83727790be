"""Overload stubs, the order of definitions, and a graph cap that cuts callers and callees
alike."""

from __future__ import annotations

from retrieval.indexing.parsing.overloads import is_overload_stub
from retrieval.search.graph import GraphNode, _Link, choose_neighbours
from retrieval.search.references import Definition, order_definitions


def test_overload_stubs_are_told_from_implementations() -> None:
    assert is_overload_stub("python", "@overload\ndef f(x: int) -> int: ...")
    assert is_overload_stub("python", "@typing.overload\n@staticmethod\ndef f(): ...")
    assert is_overload_stub("python", "  @t.overload  # int\n  async def f(): ...")
    assert not is_overload_stub("python", "def f(x):\n    return overload(x)\n")
    assert not is_overload_stub("python", "@functools.cache\ndef f(): ...")
    assert not is_overload_stub("python", "def f():\n    @overload\n    def g(): ...\n")
    assert not is_overload_stub("java", "@overload\nvoid f() {}")


def _definition(qname: str, level: int, stub: bool, line: int = 1) -> Definition:
    node = GraphNode(f"code:{line}", "r", "a.py", qname, "method", line, line, "")
    return Definition(node, level, stub)


def test_definitions_keep_the_best_level_implementation_first() -> None:
    found = [
        _definition("m.C.invoke", 0, True, 3),
        _definition("m.C.invoke#2", 0, True, 6),
        _definition("m.C.invoke#3", 0, False, 9),
        _definition("m.D.invoke", 2, False, 20),
    ]
    names = [d.node.qualified_name for d in order_definitions(found)]
    assert names == ["m.C.invoke#3", "m.C.invoke", "m.C.invoke#2"]
    assert order_definitions([]) == []
    assert [d.node.qualified_name for d in order_definitions(found[3:])] == ["m.D.invoke"]


def test_the_cap_takes_callers_and_callees_in_turn() -> None:
    seed = 1
    parent = _Link(1, 0, 100, seed, "contains", 0)
    callers = [_Link(1, 1, 200 + i, seed, "calls", 10 + i) for i in range(10)]
    callees = [_Link(1, 2, seed, 300 + i, "calls", 50 + i) for i in range(3)]
    chosen = choose_neighbours([seed], [*callees, *callers, parent], cap=6)
    assert chosen == [100, 200, 300, 201, 301, 202]
    everyone = choose_neighbours([seed], [*callees, *callers, parent], cap=None)
    assert len(everyone) == 14 and set(everyone) >= {300, 301, 302}

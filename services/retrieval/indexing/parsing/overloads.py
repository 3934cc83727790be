"""Typing overload stubs (`@overload` in Python): declarations of one name's signatures,
not its implementation. Edges resolve to the implementation, and find-references and the
graph put it first."""

from __future__ import annotations

import re

# A `@overload` (or `@typing.overload`, `@t.overload`) decorator line before the `def`.
_OVERLOAD = re.compile(r"^\s*@\s*(?:[A-Za-z_]\w*\s*\.\s*)*overload\s*(?:#.*)?$")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s")


def is_overload_stub(language: str, body: str) -> bool:
    """Whether a node (its body starts with its decorators) is a typing overload stub."""
    if language != "python":
        return False
    for line in body.splitlines():
        if _DEF.match(line):
            return False
        if _OVERLOAD.match(line):
            return True
    return False

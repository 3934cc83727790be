"""Qualified names as the index stores them.

Every qualified name uses `.` as its separator in every language (Rust `a::b`, C++
`ns::Class` and Ruby `A::B` included), and is unique within one file: a repeated name
(overloads, conditional definitions, several `init` functions) gets `#2`, `#3`... in source
order. The parser writes them (`numbered`); summaries, embedded texts, overload grouping,
containment and the names said in words read them back (`unnumbered`, `short_name`).
"""

from __future__ import annotations

import re

_REPEAT = re.compile(r"#\d+$")


def numbered(qualified_name: str, count: int) -> str:
    """The `count`-th definition of a name in one file: `X.f`, then `X.f#2`, `X.f#3`..."""
    return qualified_name if count < 2 else f"{qualified_name}#{count}"


def unnumbered(qualified_name: str) -> str:
    """The name without the `#N` that marks a repeated definition (`X.f#2` -> `X.f`): the
    name as the source writes it, for what is embedded or shown as text."""
    return _REPEAT.sub("", qualified_name)


def short_name(qualified_name: str) -> str:
    """The last part of a qualified name, as written (`pkg.X.f#2` -> `f`; `` -> ``)."""
    return unnumbered(qualified_name).rsplit(".", 1)[-1]

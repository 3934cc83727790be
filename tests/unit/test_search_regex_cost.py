"""retrieval.search.regex_cost: the size PostgreSQL's automaton would have, from the
pattern's syntax, and grep's check_pattern refusing what is too big or unbounded."""

from __future__ import annotations

import pytest

from retrieval.search.reading import check_pattern
from retrieval.search.regex_cost import REGEX_STATES_MAX, regex_cost
from svckit.errors import InvalidArgument

# From the penetration test: each stalled or failed PostgreSQL before this check.
HOSTILE = ("(a{1,100}){1,100}$", "(a{1,140}){1,140}b", "(a{1,200}){1,200}b")


@pytest.mark.parametrize(
    ("pattern", "states"),
    [
        ("foo", 3),
        (r"[0-9a-f]{40}", 40),
        ("x{255}", 255),
        (r"(\d{1,3}\.){3}\d{1,3}", 15),
        ("(a{1,100}){1,100}$", 10_001),
        ("(a{1,140}){1,140}b", 19_601),
        ("(foo|bar){2,5}", 30),
        ("a{3,}", 4),  # three copies and a loop
        ("a*b+c?", 6),  # loops and skips add an arc, not a copy
        ("a{2,4}?", 4),  # non-greedy: the same size
        ("[]{}]{10}", 10),  # `]` first in a bracket is a member, not its end
        ("[[:alpha:]{}]{5}", 5),
        (r"[\]]{7}", 7),
        ("(?:ab){10}", 20),
        ("(?=ab)c", 3),
        ("a{x}", 4),  # not a bound: `{`, `x`, `}` are literals
        ("a{1,2", 5),
        ("(ab", 2),  # unbalanced: an estimate; PostgreSQL refuses it anyway
        ("ab)c", 3),
        ("a|b|c", 3),
    ],
)
def test_states_written_out(pattern: str, states: int) -> None:
    assert regex_cost(pattern).states == states


def test_back_references_are_noticed() -> None:
    assert regex_cost(r"(a)\1").backreference
    assert regex_cost(r"(a)(b)\2").backreference
    assert not regex_cost(r"\0101").backreference  # an octal escape, not a reference
    assert not regex_cost(r"[\1]").backreference  # in a bracket: a character
    assert not regex_cost(r"\d\w\s").backreference


@pytest.mark.parametrize("pattern", HOSTILE)
def test_pentest_patterns_are_refused_before_postgresql(pattern: str) -> None:
    with pytest.raises(InvalidArgument, match="too complex"):
        check_pattern(pattern, regex=True)
    # As a literal the same text is harmless: only regular expressions are judged.
    assert check_pattern(pattern, regex=False) == pattern


def test_the_cap_is_exact() -> None:
    # a{n}: n states. At the cap it passes, one over it is refused.
    check_pattern(f"(ab){{{REGEX_STATES_MAX // 2}}}", regex=True)
    with pytest.raises(InvalidArgument, match=f"at most {REGEX_STATES_MAX}"):
        check_pattern(f"(ab){{{REGEX_STATES_MAX // 2}}}c", regex=True)


def test_ordinary_patterns_pass() -> None:
    for pattern in (
        r"^def (\w+)\(",
        r"[0-9a-f]{40}",
        r"(\d{1,3}\.){3}\d{1,3}",
        r"x{255}",
        r"(a+)+$",
        r"TODO|FIXME|XXX",
        r"[^ ]{1,200} [^ ]{1,200}",
    ):
        assert check_pattern(pattern, regex=True) == pattern


def test_back_references_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="back-references"):
        check_pattern(r"(a+)\1", regex=True)
    assert check_pattern(r"(a+)\1", regex=False) == r"(a+)\1"

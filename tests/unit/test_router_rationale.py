"""Rationales name what matched where, one line, and mark weak collections."""

from __future__ import annotations

from router.rationale import describe, describe_collection


def test_terms_in_question_order_with_fields_strongest_first() -> None:
    matched = {
        "retry": frozenset({"readme"}),
        "billing": frozenset({"readme", "qualified_name", "label"}),
    }
    line = describe(["billing", "retry", "stripe"], matched)
    assert line == "matched billing (label/qualified_name/readme), retry (readme)"


def test_long_rationales_stay_one_line() -> None:
    terms = [f"t{i}" for i in range(12)]
    line = describe(terms, {t: frozenset({"path"}) for t in terms})
    assert line.endswith("t7 (path), +4 more") and "\n" not in line


def test_weak_and_unmatched_collections_are_marked() -> None:
    matched = {"billing": frozenset({"body"})}
    assert describe_collection(["billing"], matched, 0.5, 0.2) == "matched billing (body)"
    assert describe_collection(["billing"], matched, 0.1, 0.2) == (
        "matched billing (body) (weak/fallback)"
    )
    assert describe_collection(["billing"], {}, 0.0, 0.2) == (
        "no query term matched (weak/fallback)"
    )

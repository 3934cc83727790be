"""One-line rationales: which query terms matched, and in which fields.

e.g. `matched billing (qualified_name), retry (readme/path)`; a collection below the weak
threshold, or with no match at all, ends with `(weak/fallback)` so an agent knows it is a
cheap guess rather than evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

WEAK_MARK = "(weak/fallback)"
MAX_TERMS_SHOWN = 8  # one line: past this, the rest are counted, not listed

# The field named first is the strongest evidence; the rest follow in this order.
FIELD_ORDER = (
    "label",
    "qualified_name",
    "path",
    "branch",
    "heading",
    "description",
    "readme",
    "body",
)


def _fields(sources: frozenset[str]) -> str:
    known = [f for f in FIELD_ORDER if f in sources]
    return "/".join(known + sorted(sources - set(FIELD_ORDER)))


def describe(query_terms: Sequence[str], matched: Mapping[str, frozenset[str]]) -> str:
    """`matched a (field), b (field/field)`, terms in question order; '' when none matched."""
    shown = [f"{term} ({_fields(matched[term])})" for term in query_terms if term in matched]
    if not shown:
        return ""
    extra = len(shown) - MAX_TERMS_SHOWN
    line = "matched " + ", ".join(shown[:MAX_TERMS_SHOWN])
    return f"{line}, +{extra} more" if extra > 0 else line


def describe_collection(
    query_terms: Sequence[str],
    matched: Mapping[str, frozenset[str]],
    confidence: float,
    weak_threshold: float,
) -> str:
    line = describe(query_terms, matched) or "no query term matched"
    return f"{line} {WEAK_MARK}" if confidence < weak_threshold or not matched else line

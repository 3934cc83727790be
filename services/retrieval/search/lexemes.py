"""Identifier-aware text for the code store's `simple` full-text index, and for queries.

PostgreSQL's `simple` configuration keeps `ParseConfig` as one lexeme, so a query for
`parse config` (or `parse_config`) would never meet it. Both sides therefore go through
`lexical_terms`: every word becomes its lowercased joined form (`parseconfig`) followed by
its parts (`parse`, `config`, cograph_text.identifiers) when it has more than one. Index
text and query terms built with the same function always agree.
"""

from __future__ import annotations

import re

from cograph_text.identifiers import identifier_parts

_WORD = re.compile(r"\w+")
_ALNUM = re.compile(r"[^\W_]+")


def lexical_terms(text: str, split: bool = True) -> list[str]:
    """The terms of `text` in order: joined form of each word, then its parts if several.

    With `split` off (what the benchmarks measure the splitting against; the service
    always splits) a term is a lowercased alphanumeric run, as PostgreSQL's own parser
    would cut it: `ParseConfig` stays `parseconfig`, `snake_case` is `snake`, `case`."""
    if not split:
        return [match.group(0).lower() for match in _ALNUM.finditer(text)]
    terms: list[str] = []
    for match in _WORD.finditer(text):
        parts = identifier_parts(match.group(0))
        if not parts:
            continue
        terms.append("".join(parts))
        if len(parts) > 1:
            terms.extend(parts)
    return terms


def lexical_text(text: str, max_chars: int | None = None, split: bool = True) -> str:
    """Text to feed `to_tsvector('simple', ...)`: the terms joined by spaces.

    Only [\\w] characters survive, so PostgreSQL's parser reads each term as one token.
    """
    source = text if max_chars is None else text[:max_chars]
    return " ".join(lexical_terms(source, split))


def query_terms(query: str, split: bool = True) -> list[str]:
    """Distinct terms of a query, first occurrence order, for building a tsquery."""
    return list(dict.fromkeys(lexical_terms(query, split)))

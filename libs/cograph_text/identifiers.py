"""Identifier splitting: the words an identifier is made of.

`ParseConfig`, `parse_config` and `PARSE_CONFIG` are one name written three ways; each
gives `parse`, `config`. The code index (retrieval's lexemes: every word's joined form and
its parts), the lexical query built the same way, the router's question terms, the names
said in words of a search question, and the benchmarks' BM25 baseline all split with this
one function, so an identifier meets its parts in every one of them.
"""

from __future__ import annotations

import re

# Within one run of ASCII letters and digits: an acronym before a capitalised word
# (`HTTPServer` -> HTTP, Server), a capitalised or lower-case word, a trailing acronym
# (`parseHTTP` -> HTTP), or digits (`base64` -> base, 64). Every letter and digit falls in
# one part, so nothing of an ASCII identifier is lost.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def identifier_parts(word: str) -> list[str]:
    """The parts of one word (a run of word characters), lowercased, in order:
    `ParseConfig` -> [parse, config]; `snake_case` -> [snake, case]; `getHTTPResponse2` ->
    [get, http, response, 2]; `__init__` -> [init]; `` -> [].

    Underscores separate parts and are dropped. Case boundaries mean something in ASCII
    identifiers only: a piece between underscores holding any other character (`café`,
    `naïveParse`) is kept whole, lowercased, since other scripts' case rules vary and some
    have no case at all."""
    parts: list[str] = []
    for piece in word.split("_"):
        if not piece:
            continue
        if piece.isascii():
            parts.extend(match.group(0).lower() for match in _PART.finditer(piece))
        else:
            parts.append(piece.lower())
    return parts

"""Names said in words: the symbol stream's evidence for a question that writes no name.

The symbol stream matches names written as code (`ParseConfig`, `Server.Handle`) by
trigram similarity against the whole query. A question in words ("Tests whether the
character is ASCII 7 bit control") is far, in trigrams, from every qualified name, so the
stream comes back empty, yet the question often says the name of what it asks for, word by
word: `isAsciiControl`. Without that evidence a documented neighbour wins: its doc comment
("Tests whether the character is ASCII 7 bit numeric") matches the question's phrasing in
the summary and lexical streams better than the undocumented answer's code does, and
nothing in fusion says that the name of the neighbour misses the one word that tells the
two apart.

`name_word_hits` fills the symbol stream of such a question from the candidates the other
streams found: each member (function, method; containers are left out, see below) scored by
how many of its name's words the question uses, times the share of the name those words
cover: `matched * matched / words`. `isAsciiControl` (is, ascii, control: all three) scores
3; `isAsciiNumeric` (two of three) 1.33; `key` (one of one) 1. Words are compared as
identifier parts, lowercased, with a plural or third-person `s` dropped (`Gets` / `get`,
`booleans` / `boolean`), so `parse_config`, `ParseConfig` and "parses the config" agree.

Containers are left out because their name says where, not what: a module or class named
after a topic (`metadata`, `Version`) matches every question about that topic and, folded by
containment, would hand its score to whichever member ranks best. Measured on the harness's
localisation set, where questions are commit subjects, counting containers cost 0.03 of
MRR@10; members alone cost nothing there (bench/notes/quality-unseen.md, "Names said in
words").

Only where the symbol stream ran and found nothing: when a trigram match exists the
question writes a name, and the words of other names are noise beside it (appending them
after the trigram hits cost Go 0.03: flag constructors whose docs open with the name).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from cograph_text.identifiers import identifier_parts
from cograph_text.names import short_name
from retrieval.search.fusion import StreamHit, StreamName

_WORD = re.compile(r"\w+")


def singular(part: str) -> str:
    """A word part without a plural or third-person `s` (`gets` -> `get`, `entries` ->
    `entry`, `matches` -> `match`); a double `s` (`class`) and words of three letters or
    fewer (`is`, `bus`) kept. Crude on purpose (`status` -> `statu`): both sides of a
    comparison go through it, so only agreement matters."""
    if len(part) > 4 and part.endswith("ies"):
        return part[:-3] + "y"
    if len(part) > 3 and part.endswith(("ses", "xes", "ches", "shes")):
        return part[:-2]
    if len(part) > 3 and part.endswith("s") and not part.endswith("ss"):
        return part[:-1]
    return part


def word_forms(text: str) -> list[str]:
    """Every word of `text` as identifier parts in their compared form, in order."""
    return [singular(part) for word in _WORD.findall(text) for part in identifier_parts(word)]


def question_words(text: str) -> frozenset[str]:
    return frozenset(word_forms(text))


@lru_cache(maxsize=65_536)
def name_parts(qualified_name: str) -> tuple[str, ...]:
    """The compared words of the last name of `qualified_name` (`#N` dropped). Cached: the
    same candidates come back query after query, and splitting is most of the cost."""
    return tuple(word_forms(short_name(qualified_name)))


def name_score(qualified_name: str, words: frozenset[str]) -> float:
    """matched * matched / parts for the last name of `qualified_name` (0: no word)."""
    parts = name_parts(qualified_name)
    if not parts:
        return 0.0
    matched = sum(1 for part in parts if part in words)
    return matched * matched / len(parts)


def name_word_hits(
    lists: Mapping[StreamName, Sequence[StreamHit]], words: frozenset[str]
) -> list[StreamHit]:
    """The code members found by any of `lists`, ranked by `name_score`, best first; ties
    on place, then id. Members no word of the question names are left out."""
    seen: set[int] = set()
    hits: list[StreamHit] = []
    for name in sorted(lists):
        for hit in lists[name]:
            span = hit.span
            if hit.store != "code" or span is None or span.is_container or hit.id in seen:
                continue
            seen.add(hit.id)
            score = name_score(span.qualified_name, words)
            if score > 0:
                hits.append(StreamHit("body", hit.id, score, 0, span, "code", hit.place))
    hits.sort(key=lambda hit: (-hit.score, hit.place, hit.id))
    return hits

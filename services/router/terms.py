"""Turns a question into the terms the router matches against the precomputed corpus.

Identifiers are kept whole and split into parts: `billing.retry` gives `billing.retry`,
`billing`, `retry`; `parse_config` gives `parse_config`, `parse`, `config`; `ParseConfig`
gives `parseconfig`, `parse`, `config`. The whole form finds the exact symbol when it exists,
the parts find sources that spell it differently (cograph_text.identifiers). Everything is
lowercased (the corpus is), stop words (cograph_text.stopwords.ROUTER_STOP_WORDS) and
one-letter words are dropped, and duplicates keep their first position so rationales read in the
order the question was asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cograph_text.identifiers import identifier_parts
from cograph_text.stopwords import ROUTER_STOP_WORDS, is_short

# A token is a run of word characters, joined by the separators identifiers and paths use.
_TOKEN = re.compile(r"\w+(?:[./\-:]+\w+)*")
_ALNUM = re.compile(r"[a-z0-9]+")
_SEPARATORS = re.compile(r"[./\-:_]+")

# Below this length a substring match is noise ("db" is inside "feedback") and the trigram
# index cannot serve it; such terms match whole corpus entries only.
MIN_SUBSTRING_CHARS = 3


@dataclass(frozen=True)
class QueryTerm:
    """One term of a question and the LIKE pattern that finds it in the corpus."""

    text: str  # lowercased, as shown in rationales and fed to full-text search
    substring: bool  # False: matches whole corpus entries only (short terms)

    @property
    def via_tokens(self) -> bool:
        """Whether the token postings answer this term exactly.

        Corpus entries are indexed by their maximal [a-z0-9] runs; a term made only of those
        characters occurs in an entry exactly when it occurs in one of its runs. Terms with
        separators or other characters, and whole-entry (short) terms, are matched against the
        entries themselves.
        """
        return self.substring and _ALNUM.fullmatch(self.text) is not None

    @property
    def like_pattern(self) -> str:
        escaped = escape_like(self.text)
        return f"%{escaped}%" if self.substring else escaped


def escape_like(text: str) -> str:
    """Escapes LIKE's metacharacters (backslash is the default escape character)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _parts(token: str) -> list[str]:
    """The identifier parts of each piece between separators, lowercased."""
    return [part for piece in _SEPARATORS.split(token) for part in identifier_parts(piece)]


def tokenize(question: str) -> list[str]:
    """The question's terms, lowercased, stop words dropped, first occurrence kept."""
    seen: dict[str, None] = {}

    def keep(term: str) -> None:
        if not is_short(term) and term not in ROUTER_STOP_WORDS and not term.isdigit():
            seen.setdefault(term, None)

    for match in _TOKEN.finditer(question):
        token = match.group(0)
        parts = _parts(token)
        if len(parts) > 1:
            # The whole identifier first; it is never a stop word even if a part is.
            whole = token.lower()
            if not is_short(whole):
                seen.setdefault(whole, None)
        for part in parts:
            keep(part)
    return list(seen)


def query_terms(question: str, max_terms: int) -> list[QueryTerm]:
    """At most `max_terms` terms, in question order (each one costs an index lookup)."""
    return [
        QueryTerm(term, len(term) >= MIN_SUBSTRING_CHARS) for term in tokenize(question)[:max_terms]
    ]

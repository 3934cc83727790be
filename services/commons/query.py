"""Splitting a raw search query into literal phrase filters and the text to embed."""

from __future__ import annotations

from dataclasses import dataclass

QUOTE = '"'


@dataclass(frozen=True)
class ParsedQuery:
    semantic_text: str  # the whole query with the quote characters stripped
    phrases: tuple[str, ...]  # each must appear literally (case-insensitive) in the note


def parse_query(raw: str) -> ParsedQuery:
    """Phrases are the texts between pairs of double quotes.

    An unpaired trailing quote opens no phrase (the agent most likely forgot to close it and
    a filter they did not finish would silently empty the results); empty or blank phrases
    are ignored. The semantic text keeps every word, so the embedding sees what was typed.
    """
    parts = raw.split(QUOTE)
    # parts at odd indexes were inside quotes; the last one is unpaired when len is even.
    paired = parts if len(parts) % 2 == 1 else parts[:-1]
    phrases: list[str] = []
    for index in range(1, len(paired), 2):
        # Only the ends are trimmed: inside, the phrase is matched exactly as typed.
        phrase = paired[index].strip()
        if phrase and phrase.lower() not in (p.lower() for p in phrases):
            phrases.append(phrase)
    semantic = " ".join(raw.replace(QUOTE, " ").split())
    return ParsedQuery(semantic_text=semantic, phrases=tuple(phrases))


def escape_like(text: str) -> str:
    """Escapes LIKE metacharacters (backslash is PostgreSQL's default escape character)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_pattern(phrase: str) -> str:
    """An ILIKE pattern matching the phrase literally anywhere in the text."""
    return f"%{escape_like(phrase)}%"

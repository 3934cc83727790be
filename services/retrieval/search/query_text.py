"""The text side of a query: tsquery strings for the lexical stream, stopwords, and the
names a question calls a type or opens with.

The code store's `simple` configuration keeps every word, so a prose question would rank
nodes on `how`, `does`, `a` -- words every docstring has. Dropping English function words
from the *query* (never from the index) keeps the lexical stream on the words that carry
meaning; a query made only of such words (`is`, `a`) keeps them all.
"""

from __future__ import annotations

import re
from itertools import combinations

from cograph_text.stopwords import CODE_KEYWORDS, FUNCTION_WORDS, is_short
from retrieval.search.lexemes import query_terms

_WORD = re.compile(r"\w+")


def _content_words(query: str, code: bool = False) -> str:
    """The query's words without stopwords (and, for code, keywords and one-letter names),
    or all of them when nothing else would be left."""
    words = [match.group(0) for match in _WORD.finditer(query)]
    kept = [word for word in words if word.lower() not in FUNCTION_WORDS]
    if code:
        kept = [w for w in kept if not is_short(w) and w.lower() not in CODE_KEYWORDS] or kept
    return " ".join(kept or words)


MAX_TERMS = 10  # 45 pairs at most: the tsquery stays small

# What the symbol stream's trigram similarity reads of a query (which may be
# limits.SEARCH_QUERY_MAX_CHARS, 4,000, long). Its cost grows with the query's trigrams (each
# one is a posting list of the trigram index to merge): a random 4,000-character query took
# the stream past the 8 s statement timeout (503) where a normal one takes milliseconds
# (bench/notes/abuse.md, "Abuse"). And a long text cannot be similar to a name: similarity is
# shared trigrams over all trigrams of both, so at the 0.3 threshold a query with more than
# about 3.3 times a name's trigrams never matches it. 256 characters keeps every query
# naming a symbol, a signature or a sentence whole.
SYMBOL_QUERY_MAX_CHARS = 256
# What a snippet looks for in a result (snippets.first_match): a pattern per query word,
# searched in every result. A random 4,000-character query has some 600 words, which took
# hydrating ten results from 4 to 99 ms; 256 characters (about 40 words) still find the
# first match of a real question's words.
SNIPPET_QUERY_MAX_CHARS = 256


def cut_text(text: str, most: int) -> str:
    """`text` cut to at most `most` characters, at a space when the cut would split a word
    (unless the first word alone is longer)."""
    if len(text) <= most:
        return text
    head = text[:most]
    if not text[most].isspace():
        space = max(head.rfind(" "), head.rfind("\t"), head.rfind("\n"))
        if space > 0:
            head = head[:space]
    return head.rstrip()


def symbol_text(query: str) -> str:
    """The part of the query the symbol stream matches names against."""
    return cut_text(query.strip(), SYMBOL_QUERY_MAX_CHARS)


def snippet_text(query: str) -> str:
    """The part of the query whose words a snippet is centred on."""
    return cut_text(query.strip(), SNIPPET_QUERY_MAX_CHARS)


def any_two(terms: list[str]) -> str:
    """A tsquery matching text that holds at least two of `terms` (any one when there is
    only one): `(a & b) | (a & c) | (b & c)`.

    Plain OR (`a | b | c`) makes every node holding one common word (`path`, `value`) a
    candidate, and ts_rank_cd must then read each one's tsvector: at 100k nodes that was
    most of a search's time, spent on candidates with a single weak match. Requiring two
    terms is decided inside the GIN index and keeps what the lexical stream is good at --
    several query words (or an identifier's parts) together. Terms hold word characters
    only, so no tsquery syntax can leak in.
    """
    chosen = terms[:MAX_TERMS]
    if len(chosen) < 2:
        return " | ".join(chosen)
    return " | ".join(f"({a} & {b})" for a, b in combinations(chosen, 2))


def code_tsquery(query: str, split: bool = True) -> str:
    """A `to_tsquery('simple', ...)` source, with terms built exactly as the code index
    builds them (lexemes.query_terms: joined identifiers and their parts, with `split` as
    the index was built); empty when the query has no words."""
    return any_two(query_terms(_content_words(query, code=True), split))


def doc_tsquery(query: str) -> str:
    """A `to_tsquery('english', ...)` source for the document stores, from the same terms;
    PostgreSQL stems them. Empty when there are no words."""
    return any_two(query_terms(_content_words(query)))


def has_text(query: str) -> bool:
    """Whether the lexical stream can run: the query has at least one word."""
    return bool(query_terms(query))


# "the FastTimer class", "interface EventSource": a name the question calls a type. Words
# such as "type" and "object" are left out: "a JSON object" names no class.
_TYPE_WORDS = frozenset(("class", "interface", "struct", "trait", "enum"))
# A name as code writes one; tokens are names and every other non-space character alone
# (punctuation ends a phrase).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENTIFIER = re.compile(_NAME)
_TOKEN = re.compile(rf"{_NAME}|[^\sA-Za-z_]")


def type_names(query: str) -> frozenset[str]:
    """Names the question calls a class, interface, struct, trait or enum, as written: the
    name just before or after such a word (`The FastTimer class`, `interface `Reader``),
    never a stopword or another such word. Containment keeps a class so named."""
    tokens = [token for token in _TOKEN.findall(query) if token != "`"]
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if token.lower() not in _TYPE_WORDS:
            continue
        for near in tokens[max(i - 1, 0) : i] + tokens[i + 1 : i + 2]:
            if (
                (near[0].isalpha() or near[0] == "_")
                and near.lower() not in _TYPE_WORDS
                and near.lower() not in FUNCTION_WORDS
            ):
                found.add(near)
    return frozenset(found)


# `MockPool provides an API ...`, `NotExistError is the error returned ...`: a question
# whose first word is a name written as code (a capital inside it, and a lower-case letter)
# is about what that name names. One capital alone is how any sentence starts ("Stream"),
# and `MockPool.intercept` names a member, not the class.


def subject_names(query: str) -> frozenset[str]:
    """The name a question opens with when it is written as code (`MockPool provides an
    API`), backticks and a trailing `,` `:` `;` aside; empty otherwise. Containment keeps a
    small class so named."""
    first = query.split(maxsplit=1)
    if not first:
        return frozenset()
    word = first[0].strip("`").rstrip(",:;`")
    written_as_code = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    return frozenset({word}) if written_as_code and _IDENTIFIER.fullmatch(word) else frozenset()

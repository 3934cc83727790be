"""The words a query drops, and how short a word may be before it says nothing.

Two uses, two lists, on purpose:

- Search (retrieval's lexical query, snippets, query classes, the names a question calls a
  type) drops `FUNCTION_WORDS`, and from code queries also `CODE_KEYWORDS` and words
  shorter than `MIN_WORD_CHARS`. The code index keeps every word; only the query drops
  them. These lists are part of search behaviour, measured with them (docs/adr/0007, the
  lexical stream's own MRR@10 0.147 -> 0.436): changing them needs a quality run.
- The router drops `ROUTER_STOP_WORDS`: the same function words, more of them (`upon`,
  `within`, `whose`, ...), and the words every question to a router contains (`code`,
  `find`, `show`, `explain`, `works`, ...). A routing term matches a whole corpus of names
  and paths, where such a word would route every question to whatever happens to be named
  `show` or `find`. They stay out of search's list: `get`, `find`, `show`, `let`, `must` are
  common parts of identifiers (`getUser`, `findById`), which a code query written in words
  ("get the user by id") must still match, and no measurement supports dropping them there.

Both sides compare lowercased words.
"""

from __future__ import annotations

# English function words (pronouns, articles, auxiliaries, prepositions, conjunctions):
# every docstring and every question has them.
_FUNCTION_WORDS = """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not now of off on once only or other our out over own same
    she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

# Keywords and names nearly every code node contains. In a signature query
# (`func (s *Server) Handle`, `def load(self, path: str) -> dict`) they match most of the
# index, cost the lexical stream a rank computation per row and say nothing about which
# node is meant; the identifiers around them do.
_CODE_KEYWORDS = """
    async await bool boolean byte char class const def dict else elif err error false fn
    func function impl int interface let list mut nil none null object pass pub public
    private protected return self static str string struct this true type var void
"""
CODE_KEYWORDS = frozenset(_CODE_KEYWORDS.split())

# What the router drops besides FUNCTION_WORDS: more function words, and the words a
# question to a router is phrased with. Kept short on purpose: idf already discounts common
# words, and a domain word wrongly listed here could never be routed on.
_ROUTER_WORDS = """
    against done either etc every get gets got let much must ours per please theirs upon us
    via vs whats whose within without yes yet yours
    code explain find show tell work works
"""
ROUTER_STOP_WORDS = FUNCTION_WORDS | frozenset(_ROUTER_WORDS.split())

# A word of one character (`a`, `x`, `i`, a loop variable) says nothing about what a query
# asks for: code queries drop it (as they drop keywords) and the router never matches on it.
MIN_WORD_CHARS = 2


def is_short(word: str) -> bool:
    """A word too short to carry meaning on its own (fewer than MIN_WORD_CHARS)."""
    return len(word) < MIN_WORD_CHARS

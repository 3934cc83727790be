"""What kind of question a query is, from its text alone: the key of the stream weights.

- `identifier`: one name, dotted or not (`ParseConfig`, `billing.retry.Backoff`,
  `Server::Handle`); the symbol stream's question.
- `signature`: a declaration, half remembered (`def load(self, path) -> dict`,
  `func (u UUID) String() string`, `pub fn max_level() -> LevelFilter`, `parse_config(path,
  strict=False)`): a name directly followed by a parameter list, or a declaration keyword
  first, with no sentence around it.
- `prose`: words only (`Return the number of nodes in the graph.`); the vector stream's
  question, where a lexical hit on common words is weak evidence.
- `mixed`: prose that names code (`why does ParseConfig drop empty keys`, `retry in
  `fetch_all``): a word shaped like an identifier (snake_case, camelCase, dotted, a call,
  backticks) among ordinary words.

Pure and cheap: a few regular expressions over at most a few hundred characters.
"""

from __future__ import annotations

import re
from typing import Literal

from cograph_text.stopwords import FUNCTION_WORDS
from retrieval.search.search_sql import symbol_identifier

QueryClass = Literal["identifier", "signature", "prose", "mixed"]
QUERY_CLASSES: tuple[QueryClass, ...] = ("identifier", "signature", "prose", "mixed")

# A declaration keyword or modifier at the start: Python, JS/TS, Go, Rust, Java, C#.
_DECLARATION = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([\w:]+\))?\s+)?"
    r"(?:async\s+def|def|async\s+function\*?|function\*?|func|fn|class|struct|enum|trait|impl|"
    r"interface|type|const|let|var|public|private|protected|static|final|abstract|"
    r"override|unsafe|extern)\b"
)
# `name(` or `name (`: a call or a parameter list.
_CALL = re.compile(r"[A-Za-z_$][\w$.:<>]*\s*\(")
# What sentences have and declarations do not.
_SENTENCE_END = re.compile(r"[.!?]\s*$")
_WORD = re.compile(r"[A-Za-z]+")
# A word written like code: snake_case, camelCase / PascalCase with an inner capital,
# dotted or `::` paths, a trailing call, or backticks.
_CODE_WORD = re.compile(
    r"`[^`]+`"
    r"|\b[A-Za-z_$][\w$]*_[\w$]+\b"
    r"|\b[a-z][a-z0-9]*[A-Z][\w$]*\b"
    r"|\b[A-Z][a-z0-9]+[A-Z][\w$]*\b"
    r"|\b[A-Za-z_$][\w$]*(?:\.|::)[A-Za-z_$][\w$]*"
    r"|\b[A-Za-z_$][\w$]*\(\)"
)
_PUNCTUATION = set("()[]{}<>:;=,*&|->")


def classify(text: str) -> QueryClass:
    """The class of a query (see the module docstring)."""
    stripped = " ".join(text.split())
    if not stripped:
        return "prose"
    if symbol_identifier(stripped) is not None:
        return "identifier"
    if _is_signature(stripped):
        return "signature"
    if _CODE_WORD.search(stripped):
        return "mixed"
    return "prose"


def _is_signature(text: str) -> bool:
    if _DECLARATION.match(text) and not _SENTENCE_END.search(text):
        return True
    call = _CALL.search(text)
    if call is None or "(" not in text[call.start() :] or ")" not in text:
        return False
    # The name and parameter list lead: at most a few modifier or type words before the
    # name, and the words around it are not a sentence.
    head = text[: call.start()].split()
    if len(head) > 4 or any(word.lower() in FUNCTION_WORDS for word in head):
        return False
    words = _WORD.findall(text)
    punctuation = sum(1 for char in text if char in _PUNCTUATION)
    if _SENTENCE_END.search(text) and punctuation < 4:
        return False
    return punctuation >= 2 or len(words) <= 6

"""Text shaping for queries: light signature perturbations and prose clean-up. Pure.

A signature query is what a developer half-remembers: the declaration line with a
parameter's type left out, different spacing, or no `def`/`function` keyword. Each
perturbation returns None when it does not apply, so a caller can pick among the ones that
change something.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

_KEYWORDS = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:async\s+def|def|async\s+function\*?|function\*?|const|let|var|"
    r"static\s+async|static|async)\s+"
)
_RETURN = re.compile(r"\s*->\s*[^:]+:?\s*$")
_ROLE = re.compile(r":[\w:.-]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``|`([^`]+)`")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HTML = re.compile(r"<[^>]+>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_)(\S(?:.*?\S)?)\1")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) become single spaces."""
    return " ".join(text.split())


def split_params(signature: str) -> tuple[str, list[str], str] | None:
    """`def f(a: int, b=1) -> X:` -> ('def f(', ['a: int', ' b=1'], ') -> X:').

    Splits at the commas of the outermost parentheses only, so annotations such as
    `dict[str, int]` stay whole. None when the signature has no balanced parameter list.
    """
    open_at = signature.find("(")
    if open_at < 0:
        return None
    depth = 0
    params: list[str] = []
    start = open_at + 1
    for index in range(open_at, len(signature)):
        char = signature[index]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                params.append(signature[start:index])
                tail = signature[index:]
                head = signature[: open_at + 1]
                return head, [p for p in params if p.strip()], tail
        elif char == "," and depth == 1:
            params.append(signature[start:index])
            start = index + 1
    return None


def _top_level_index(text: str, char: str) -> int:
    depth = 0
    for index, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == char and depth == 0:
            return index
    return -1


def drop_annotation(signature: str, rng: random.Random) -> str | None:
    """Removes one parameter's `: type` (keeping any default)."""
    parts = split_params(signature)
    if parts is None:
        return None
    head, params, tail = parts
    annotated = [i for i, p in enumerate(params) if _top_level_index(p, ":") >= 0]
    if not annotated:
        return None
    pick = rng.choice(annotated)
    param = params[pick]
    colon = _top_level_index(param, ":")
    rest = param[colon + 1 :]
    equals = _top_level_index(rest, "=")
    default = "" if equals < 0 else "=" + rest[equals + 1 :].strip()
    params[pick] = param[:colon].rstrip() + default
    return head + ",".join(params) + tail


def drop_keyword(signature: str, rng: random.Random) -> str | None:
    """`def f(...)` -> `f(...)`; `const f = (...) =>` -> `f = (...) =>`."""
    del rng  # deterministic; the parameter keeps one signature for every perturbation
    stripped = _KEYWORDS.sub("", signature, count=1)
    return stripped if stripped != signature else None


def drop_return(signature: str, rng: random.Random) -> str | None:
    """`def f(a) -> int:` -> `def f(a)`."""
    del rng
    stripped = _RETURN.sub("", signature)
    return stripped if stripped != signature else None


def respace(signature: str, rng: random.Random) -> str | None:
    """Either no spaces after commas and around `=`/`:`, or padded parentheses."""
    if rng.random() < 0.5:
        changed = re.sub(r"\s*([,=:])\s*", r"\1", signature)
        changed = changed.replace("->", " -> ")
    else:
        changed = re.sub(r"\(\s*", "( ", signature)
        changed = re.sub(r"\s*\)", " )", changed)
    return changed if changed != signature else None


PERTURBATIONS: dict[str, Callable[[str, random.Random], str | None]] = {
    "drop-annotation": drop_annotation,
    "drop-keyword": drop_keyword,
    "drop-return": drop_return,
    "respace": respace,
}


def perturb_signature(signature: str, rng: random.Random) -> tuple[str, str] | None:
    """One or two perturbations of a one-line signature: (text, variant label).

    The first is drawn among those that change the text; a keyword drop is added half the
    time on top, the most common way a signature is typed from memory.
    """
    text = one_line(signature)
    options = [(name, fn(text, rng)) for name, fn in PERTURBATIONS.items()]
    usable = [(name, out) for name, out in options if out is not None and out.strip()]
    if not usable:
        return None
    name, out = rng.choice(usable)
    assert out is not None
    labels = [name]
    if name != "drop-keyword" and rng.random() < 0.5:
        again = drop_keyword(out, rng)
        if again is not None:
            out, labels = again, [*labels, "drop-keyword"]
    return out.strip(), "+".join(labels)


def clean_prose(text: str) -> str:
    """Markup out of docstrings and markdown: roles, literals, links, html, emphasis."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = _LINK.sub(r"\1", text)
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    text = _HTML.sub(" ", text)
    text = _EMPHASIS.sub(r"\2", text)
    return one_line(text)


def first_sentence(text: str, max_words: int = 40) -> str:
    """The first sentence of the first paragraph, cleaned; at most `max_words` words."""
    paragraph = text.strip().split("\n\n", 1)[0]
    flat = clean_prose(paragraph)
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
    words = sentence.split()
    return " ".join(words[:max_words])

"""Syntax highlighting for the console's file view, with Pygments.

The console asks for a file's lines (the same read as POST /api/read) and gets them back
as tokens: per line, a list of [css class, text] pairs, the class being Pygments' short
name (`k` a keyword, `nf` a function name, ...) that the stylesheet from `stylesheet()`
colours. Tokens rather than Pygments' HTML so that the page never parses markup made from
a file's content: it sets each token as text (console.js), and a file holding `<script>`
shows those characters and runs nothing.
"""

from __future__ import annotations

from typing import Any

from pygments import lex
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

Token = list[str]  # [css class, text]; the class is "" for plain text
Line = list[Token]

# The selector the console's code view carries (console.js); the stylesheet's rules are
# scoped to it so that Pygments' short class names (`k`, `s`, `c`) touch nothing else.
SCOPE = ".code"
STYLE = "default"


def lexer_for(path: str, language: str = "") -> Lexer:
    """The lexer for a file by its name, else by the language the index gave it, else
    plain text. Content is never used to guess, so a file cannot pick its own lexer."""
    # Lines kept as they are (no stripping), so that the tokens' lines are the read's.
    options: dict[str, Any] = {"stripnl": False, "stripall": False, "ensurenl": True}
    try:
        return get_lexer_for_filename(path, None, **options)
    except ClassNotFound:
        pass
    if language:
        try:
            return get_lexer_by_name(language, **options)
        except ClassNotFound:
            pass
    return TextLexer(**options)


def _css_class(ttype: _TokenType) -> str:
    # The nearest token type the stylesheet has a rule for (Pygments' own HTML does the same
    # walk and then appends the subtype, which no rule matches).
    current: _TokenType | None = ttype
    while current is not None and current not in STANDARD_TYPES:
        current = current.parent
    return STANDARD_TYPES[current] if current is not None else ""


def line_count(content: str) -> int:
    """Lines in `content` as a read counts them: a final newline ends the last line."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def tokens(content: str, path: str, language: str = "") -> tuple[str, list[Line]]:
    """The lexer's name and `content` as highlighted lines, one per line of content; the
    texts of a line's tokens joined are that line (without its newline and carriage
    returns)."""
    lexer = lexer_for(path, language)
    # Pygments turns a lone \r into a line break, where a read counts lines by \n alone:
    # carriage returns go (they show as nothing) so that both count the same lines.
    lines: list[Line] = [[]]
    for ttype, value in lex(content.replace("\r", ""), lexer):
        css = _css_class(ttype)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if not part:
                continue
            current = lines[-1]
            if current and current[-1][0] == css:
                current[-1][1] += part  # one span for a run of one class: a smaller answer
            else:
                current.append([css, part])
    del lines[line_count(content) :]
    return lexer.name, lines


def stylesheet() -> str:
    """The CSS for the classes `tokens` gives, scoped to the console's code view."""
    formatter = HtmlFormatter(style=STYLE)
    # Token and background rules only: the rest (pre, line number tables) would reach
    # elements outside the code view.
    rules = [*formatter.get_background_style_defs(SCOPE), *formatter.get_token_style_defs(SCOPE)]
    return "\n".join(rules) + "\n"

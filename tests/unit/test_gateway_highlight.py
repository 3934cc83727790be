"""gateway.highlight: a file's lines as Pygments tokens for the console's file view."""

from __future__ import annotations

import re

import pytest

from gateway.highlight import SCOPE, lexer_for, line_count, stylesheet, tokens

PY = 'class ParseConfig:\n    def load(self, path):\n        return "<script>"\n'


def _text(line: list[list[str]]) -> str:
    return "".join(text for _, text in line)


def test_each_line_of_content_is_one_line_of_tokens_with_its_text() -> None:
    name, lines = tokens(PY, "cfg/config.py")
    assert name == "Python"
    assert [_text(line) for line in lines] == PY.splitlines()


def test_keywords_and_names_carry_the_classes_the_stylesheet_colours() -> None:
    _, lines = tokens(PY, "config.py")
    assert ["k", "class"] in lines[0]
    assert ["nc", "ParseConfig"] in lines[0]
    assert ["nf", "load"] in lines[1]
    css = stylesheet()
    for cls in ("k", "nc", "nf"):
        assert re.search(rf"^\{SCOPE} \.{cls} \{{", css, re.MULTILINE), cls


@pytest.mark.parametrize(
    "content",
    ["a\nb", "a\nb\n", "\n", "a\n\n\nb\n\n", "only", "x\r\ny\r\n", "lone\rreturn\n"],
)
def test_the_line_count_is_the_reads_whatever_the_newlines(content: str) -> None:
    _, lines = tokens(content, "notes.txt")
    assert len(lines) == line_count(content) == len(content.replace("\r", "").splitlines())
    assert [_text(line) for line in lines] == content.replace("\r", "").splitlines()


def test_empty_content_is_no_lines() -> None:
    assert tokens("", "empty.py")[1] == []


def test_markup_in_a_file_stays_text_in_the_tokens() -> None:
    hostile = '<script>alert(1)</script>\n<img src=x onerror="alert(2)">\n'
    _, lines = tokens(hostile, "page.html")
    # The texts are the characters of the file, nothing escaped and nothing dropped: the
    # page sets them as text, which is what keeps them from being markup.
    assert [_text(line) for line in lines] == hostile.splitlines()


def test_the_lexer_comes_from_the_name_then_the_language_never_the_content() -> None:
    assert lexer_for("main.go").name == "Go"
    assert lexer_for("build.unknownext", "python").name == "Python"
    assert lexer_for("README").name == "Text only"
    # A shebang does not make a file without a known name a script.
    assert tokens("#!/usr/bin/env python\nimport os\n", "tool")[0] == "Text only"


def test_a_run_of_one_class_is_one_token() -> None:
    _, lines = tokens("just some words here\n", "words.txt")
    assert lines == [[["", "just some words here"]]]


def test_the_stylesheet_reaches_nothing_outside_the_code_view() -> None:
    for rule in stylesheet().splitlines():
        assert rule.startswith(SCOPE), rule

"""cograph_text.identifiers and cograph_text.names: an identifier's words, and qualified
names as the index stores them."""

from __future__ import annotations

import pytest

from cograph_text.identifiers import identifier_parts
from cograph_text.names import numbered, short_name, unnumbered


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        # camelCase, PascalCase, snake_case, SCREAMING_CASE
        ("parseConfig", ["parse", "config"]),
        ("ParseConfig", ["parse", "config"]),
        ("parse_config", ["parse", "config"]),
        ("SCREAMING_CASE", ["screaming", "case"]),
        ("simple", ["simple"]),
        # acronyms: a run of capitals before a capitalised word, or at the end
        ("HTTPServer", ["http", "server"]),
        ("getHTTPResponse2", ["get", "http", "response", "2"]),
        ("parseHTTP", ["parse", "http"]),
        ("HTTP", ["http"]),
        ("IOError", ["io", "error"]),
        ("getURL", ["get", "url"]),
        ("HTTPServerError", ["http", "server", "error"]),
        # digits are parts of their own
        ("base64", ["base", "64"]),
        ("parseV2Config", ["parse", "v", "2", "config"]),
        ("parse_config2", ["parse", "config", "2"]),
        ("2024", ["2024"]),
        ("x86_64", ["x", "86", "64"]),
        # underscores only separate: dunders, leading, doubled
        ("__init__", ["init"]),
        ("__dunder__", ["dunder"]),
        ("_private", ["private"]),
        ("a__b", ["a", "b"]),
        ("___", []),
        # other scripts: a piece with any non-ASCII character stays whole, lowercased
        ("café", ["café"]),
        ("naïveParse", ["naïveparse"]),
        ("Ärger_count", ["ärger", "count"]),
        ("名前", ["名前"]),
        ("", []),
    ],
)
def test_identifier_parts(word: str, parts: list[str]) -> None:
    assert identifier_parts(word) == parts


def test_spellings_of_one_name_share_their_parts() -> None:
    spellings = ("parseConfig", "ParseConfig", "parse_config", "PARSE_CONFIG", "parseconfig")
    assert {tuple(identifier_parts(s)) for s in spellings[:4]} == {("parse", "config")}
    # Without a case boundary or an underscore there is nothing to split on.
    assert identifier_parts(spellings[4]) == ["parseconfig"]


def test_every_letter_and_digit_of_an_ascii_identifier_is_kept() -> None:
    for word in ("getHTTPResponse2", "XMLHttpRequest", "a1B2c3", "ABCdefGHI", "v1_2_3rc"):
        assert "".join(identifier_parts(word)) == word.replace("_", "").lower()


@pytest.mark.parametrize(
    ("qualified", "unnumbered_name", "short"),
    [
        ("pkg.X.f", "pkg.X.f", "f"),
        ("pkg.X.f#2", "pkg.X.f", "f"),
        ("pkg.X.f#12", "pkg.X.f", "f"),
        ("f", "f", "f"),
        ("Minipass.[RESUME]", "Minipass.[RESUME]", "[RESUME]"),
        ("x#y.z", "x#y.z", "z"),  # only a trailing #N marks a repeat
        ("", "", ""),
    ],
)
def test_qualified_names(qualified: str, unnumbered_name: str, short: str) -> None:
    assert unnumbered(qualified) == unnumbered_name
    assert short_name(qualified) == short


def test_numbered_marks_repeats_from_the_second_and_unnumbered_undoes_it() -> None:
    assert [numbered("X.f", n) for n in (1, 2, 3)] == ["X.f", "X.f#2", "X.f#3"]
    assert {unnumbered(numbered("X.f", n)) for n in range(1, 12)} == {"X.f"}

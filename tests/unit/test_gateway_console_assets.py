"""The console's static files: the bounds its inputs carry are the API's (cograph_api.limits),
and nothing in them builds markup from data, runs inline or loads from elsewhere."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from cograph_api import limits
from gateway.routes_console import CONSOLE_DIR


class _Inputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str | None]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if found.get("id"):
            self.by_id[str(found["id"])] = found


def _page() -> _Inputs:
    parser = _Inputs()
    parser.feed((CONSOLE_DIR / "index.html").read_text())
    return parser


def test_the_inputs_bounds_are_the_apis() -> None:
    inputs = _page().by_id
    assert inputs["code-query"]["maxlength"] == str(limits.SEARCH_QUERY_MAX_CHARS)
    assert inputs["code-top-k"]["min"] == str(limits.TOP_K_MIN)
    assert inputs["code-top-k"]["max"] == str(limits.TOP_K_MAX)
    assert inputs["code-snippet"]["min"] == str(limits.SNIPPET_CHARS_MIN)
    assert inputs["code-snippet"]["max"] == str(limits.SNIPPET_CHARS_MAX)
    assert inputs["commons-query"]["maxlength"] == str(limits.COMMONS_QUERY_MAX_CHARS)
    assert inputs["post-title"]["maxlength"] == str(limits.POST_TITLE_MAX_CHARS)
    assert inputs["post-body"]["maxlength"] == str(limits.POST_BODY_MAX_CHARS)
    assert inputs["display-name"]["maxlength"] == str(limits.DISPLAY_NAME_MAX_CHARS)
    script = (CONSOLE_DIR / "console.js").read_text()
    assert f"const COMMENT_MAX_CHARS = {limits.COMMENT_MAX_CHARS};" in script
    page = re.search(r"const RECENT_PAGE = (\d+);", script)
    assert page and limits.POSTS_LIMIT_MIN <= int(page[1]) <= limits.POSTS_LIMIT_MAX


def test_the_page_runs_only_its_own_script_and_styles() -> None:
    for tag, attrs in _page().tags:
        assert "style" not in attrs, tag
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").startswith("/search/"), attrs  # type: ignore[union-attr]
        if tag == "link":
            assert str(attrs.get("href")).startswith("/search/"), attrs
    for name in ("index.html", "console.js", "console.css"):
        assert not re.search(r"https?://", (CONSOLE_DIR / name).read_text()), name


def test_the_script_never_parses_markup_or_code_from_strings() -> None:
    # Comments may name what the code avoids.
    script = re.sub(r"^\s*//.*$", "", (CONSOLE_DIR / "console.js").read_text(), flags=re.M)
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setTimeout("',
        "DOMParser",
    ):
        assert sink not in script, sink

"""The query classifier that picks the stream weights (query_class.py)."""

from __future__ import annotations

import pytest

from retrieval.search.query_class import classify


@pytest.mark.parametrize(
    "text",
    [
        "ParseConfig",
        "parse_config",
        "billing.retry.Backoff",
        "Server::Handle",
        "lru-cache.LRUCache.get",
        "  RetryPolicy.delay ",
        "get",
    ],
)
def test_identifiers(text: str) -> None:
    assert classify(text) == "identifier"


@pytest.mark.parametrize(
    "text",
    [
        "def load(self, path: str) -> dict:",
        "def load(self, path)",
        "load(self, path: str) -> dict",
        "async def fetch(url, *, timeout=None)",
        "function minimatch(pattern, options)",
        "minimatch (pattern , options)",
        "export default function glob(pattern, options = {})",
        "func (u UUID) String() string",
        "pub fn max_level() -> LevelFilter",
        "public static boolean toBoolean(final Boolean bool)",
        "const parse = (version, options) =>",
        "class Range",
        "match_file(self, file)",
    ],
)
def test_signatures(text: str) -> None:
    assert classify(text) == "signature"


@pytest.mark.parametrize(
    "text",
    [
        "Return the number of nodes in the graph.",
        "How do I configure logging levels in log?",
        "Fix crash when the version string is empty",
        "Checks if a string contains only whitespace (or is empty).",
        "",
        "Add support for Python 3.14",
    ],
)
def test_prose(text: str) -> None:
    assert classify(text) == "prose"


@pytest.mark.parametrize(
    "text",
    [
        "why does ParseConfig drop empty keys",
        "retry logic in fetch_all",
        "what calls `load` on startup",
        "how is Version.parse used",
        "when is reset() called",
    ],
)
def test_mixed(text: str) -> None:
    assert classify(text) == "mixed"

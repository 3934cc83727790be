"""Which grammar reads which file, and the lazily built tree-sitter objects for it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

from tree_sitter import Language, Parser, Query

# language name -> (grammar module, function returning the language pointer)
_GRAMMARS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "python": ("tree_sitter_python", "language"),
        "go": ("tree_sitter_go", "language"),
        "javascript": ("tree_sitter_javascript", "language"),
        "typescript": ("tree_sitter_typescript", "language_typescript"),
        "tsx": ("tree_sitter_typescript", "language_tsx"),
        "java": ("tree_sitter_java", "language"),
        "rust": ("tree_sitter_rust", "language"),
        "c": ("tree_sitter_c", "language"),
        "cpp": ("tree_sitter_cpp", "language"),
        "ruby": ("tree_sitter_ruby", "language"),
    }
)

EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {
        ".py": "python",
        ".pyi": "python",
        ".go": "go",
        ".js": "javascript",
        ".mjs": "javascript",
        ".cjs": "javascript",
        ".jsx": "javascript",
        ".ts": "typescript",
        ".mts": "typescript",
        ".cts": "typescript",
        ".tsx": "tsx",
        ".java": "java",
        ".rs": "rust",
        ".c": "c",
        ".h": "c",
        ".cc": "cpp",
        ".cpp": "cpp",
        ".cxx": "cpp",
        ".hpp": "cpp",
        ".hh": "cpp",
        ".hxx": "cpp",
        ".rb": "ruby",
    }
)

SUPPORTED_LANGUAGES: frozenset[str] = frozenset(_GRAMMARS)


def detect_language(path: str) -> str | None:
    """The grammar name for ``path`` by extension, or None when no grammar applies."""
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return None
    return EXTENSIONS.get(path[dot:].lower())


class Grammars:
    """Loads each grammar on first use and keeps one Parser and compiled Query per language.

    Parsers are not thread-safe: give each worker thread its own ``Grammars``.
    """

    def __init__(self) -> None:
        self._languages: dict[str, Language] = {}
        self._parsers: dict[str, Parser] = {}
        self._queries: dict[tuple[str, str], Query] = {}

    def language(self, name: str) -> Language:
        lang = self._languages.get(name)
        if lang is None:
            module_name, attr = _GRAMMARS[name]
            factory: Callable[[], object] = getattr(importlib.import_module(module_name), attr)
            lang = Language(factory())
            self._languages[name] = lang
        return lang

    def parser(self, name: str) -> Parser:
        parser = self._parsers.get(name)
        if parser is None:
            parser = Parser(self.language(name))
            self._parsers[name] = parser
        return parser

    def query(self, name: str, source: str) -> Query:
        """A compiled query, cached by (language, query text)."""
        key = (name, source)
        query = self._queries.get(key)
        if query is None:
            query = Query(self.language(name), source)
            self._queries[key] = query
        return query

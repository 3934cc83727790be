"""Entry point: bytes of one file in, nodes and edges out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .extract import Extractor
from .languages import Grammars, detect_language
from .nodes import ParsedFile
from .rules import LanguageRules


def _rules_for(language: str) -> LanguageRules:
    # Imported here so that a process indexing only Go never builds the Python rules.
    factories: dict[str, Callable[[], LanguageRules]]
    from .rules_c import CppRules, CRules
    from .rules_go import GoRules
    from .rules_java import JavaRules
    from .rules_js import JavaScriptRules, TsxRules, TypeScriptRules
    from .rules_python import PythonRules
    from .rules_ruby import RubyRules
    from .rules_rust import RustRules

    factories = {
        "python": PythonRules,
        "go": GoRules,
        "javascript": JavaScriptRules,
        "typescript": TypeScriptRules,
        "tsx": TsxRules,
        "java": JavaRules,
        "rust": RustRules,
        "c": CRules,
        "cpp": CppRules,
        "ruby": RubyRules,
    }
    return factories[language]()


class CodeParser:
    """Parses files into ``ParsedFile``s, reusing one parser and query per language.

    Keep one instance per worker thread and feed it every file: building grammars and
    compiling queries is the expensive part, parsing a file is cheap.
    """

    def __init__(self, source_roots: Sequence[str] = ()) -> None:
        self._grammars = Grammars()
        self._extractors: dict[str, Extractor] = {}
        self._source_roots = tuple(source_roots)

    def parse(self, path: str, source: bytes) -> ParsedFile | None:
        """The file's nodes and edges, or None when no grammar handles its extension."""
        language = detect_language(path)
        if language is None:
            return None
        extractor = self._extractors.get(language)
        if extractor is None:
            extractor = Extractor(_rules_for(language), self._grammars)
            self._extractors[language] = extractor
        return extractor.parse(path, source, self._source_roots)


def parse_file(
    path: str,
    source: bytes,
    *,
    source_roots: Sequence[str] = (),
    parser: CodeParser | None = None,
) -> ParsedFile | None:
    """Parse one file; pass a long-lived ``parser`` when parsing many files.

    ``source_roots`` applies only when no ``parser`` is given (a parser carries its own).
    """
    return (parser or CodeParser(source_roots)).parse(path, source)

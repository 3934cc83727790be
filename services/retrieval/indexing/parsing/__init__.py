"""Source parsing for the code index: tree-sitter in, symbols and typed edges out.

Pure functions over bytes and dataclasses; storage and file walking live elsewhere.

    parser = CodeParser()
    parsed = parser.parse("src/billing/retry.py", source_bytes)  # None: not a known language
    chunks = chunk_plain_text("README.txt", text)                # for everything else
    resolved = resolve_parsed([parsed, ...])
"""

from .importmap import ImportMap, resolve_imports
from .languages import EXTENSIONS, SUPPORTED_LANGUAGES, Grammars, detect_language
from .modnames import module_name
from .nodes import (
    EDGE_KINDS,
    NODE_KINDS,
    CodeNode,
    Edge,
    EdgeKind,
    NodeKind,
    ParsedFile,
    ResolvedEdge,
    TextChunk,
)
from .parser import CodeParser, parse_file
from .plaintext import chunk_plain_text
from .resolve import resolve_edges, resolve_parsed

__all__ = [
    "EDGE_KINDS",
    "EXTENSIONS",
    "NODE_KINDS",
    "SUPPORTED_LANGUAGES",
    "CodeNode",
    "CodeParser",
    "Edge",
    "EdgeKind",
    "Grammars",
    "ImportMap",
    "NodeKind",
    "ParsedFile",
    "ResolvedEdge",
    "TextChunk",
    "chunk_plain_text",
    "detect_language",
    "module_name",
    "parse_file",
    "resolve_edges",
    "resolve_imports",
    "resolve_parsed",
]

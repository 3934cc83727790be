"""One file in, rows and texts to embed out: parse, chunk, blame, summarise.

Runs in worker threads (parsing and git blame are the CPU- and process-bound parts); each
thread keeps its own CodeParser because tree-sitter parsers are not thread-safe.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from cograph_text.identifiers import identifier_parts
from cograph_text.names import unnumbered
from retrieval.indexing.blame import LineTimes
from retrieval.indexing.markdown import chunk_markdown, is_markdown
from retrieval.indexing.parsing import CodeParser, chunk_plain_text
from retrieval.indexing.pipeline import WorkUnit
from retrieval.indexing.records import DocRecord, EdgeRecord, FilePayload, NodeRecord
from retrieval.indexing.snapshots import Snapshot
from retrieval.indexing.sources import SourceFile
from retrieval.indexing.summaries import SummaryInput

# Prose that is not markdown still belongs with the repository's documents.
_PROSE_EXTENSIONS = {".rst": "rst", ".txt": "text", ".adoc": "asciidoc", ".org": "org"}
_TEXT_LANGUAGES = {
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".sql": "sql",
    ".proto": "protobuf",
    ".html": "html",
    ".css": "css",
    ".scss": "css",
    ".xml": "xml",
    ".kt": "kotlin",
    ".swift": "swift",
    ".php": "php",
    ".cs": "csharp",
    ".scala": "scala",
    ".lua": "lua",
    ".tf": "terraform",
    ".gradle": "gradle",
}
_TEXT_NAMES = {"Dockerfile": "dockerfile", "Makefile": "make", "Jenkinsfile": "groovy"}


def text_language(path: str) -> str:
    name = posixpath.basename(path)
    if name in _TEXT_NAMES:
        return _TEXT_NAMES[name]
    ext = posixpath.splitext(name)[1].lower()
    return _TEXT_LANGUAGES.get(ext) or _PROSE_EXTENSIONS.get(ext) or "text"


def _name_signature_body(node: NodeRecord) -> str:
    # Qualified name and signature first: they name what the body does, and the model
    # reads only the first ~256 word pieces. The name as written (no `#2`: the index's
    # marker for a repeated name is not in the source, and it moved overloads' vectors
    # apart from the question, bench/notes/quality-unseen.md "Names said in words").
    return f"{unnumbered(node.qualified_name)}\n{node.signature}\n{node.body}"


def _words_signature_body(node: NodeRecord) -> str:
    # The name as words (`billing.ParseConfig` -> `billing parse config`), closer to how a
    # question would say it.
    name = unnumbered(node.qualified_name)
    words = " ".join(p for part in name.split(".") for p in identifier_parts(part))
    return f"{words}\n{node.signature}\n{node.body}"


def _name_signature_docstring(node: NodeRecord) -> str:
    # The header alone: what a reader sees before the implementation.
    return f"{unnumbered(node.qualified_name)}\n{node.signature}\n{node.docstring or ''}".rstrip()


def _body(node: NodeRecord) -> str:
    return node.body


# What a code node's vector is computed from (RETRIEVAL_CODE_EMBED_TEXT); the evaluation
# harness compares them (bench/notes/quality.md, "What a code node's vector is computed
# from").
CODE_EMBED_TEXTS: dict[str, Callable[[NodeRecord], str]] = {
    "name_signature_body": _name_signature_body,
    "words_signature_body": _words_signature_body,
    "name_signature_docstring": _name_signature_docstring,
    "body": _body,
}
DEFAULT_CODE_EMBED_TEXT = "name_signature_body"


def code_embedding_text(node: NodeRecord, variant: str = DEFAULT_CODE_EMBED_TEXT) -> str:
    return CODE_EMBED_TEXTS[variant](node)


@dataclass
class Prepared:
    payload: FilePayload
    texts: list[str] = field(default_factory=list)
    summary_inputs: list[SummaryInput] = field(default_factory=list)
    summary_nodes: list[NodeRecord] = field(default_factory=list)

    def add_text(self, text: str) -> int:
        self.texts.append(text)
        return len(self.texts) - 1

    def to_unit(self, summaries: list[str]) -> WorkUnit:
        """Attaches summaries and their texts; the unit is then ready to embed."""
        for node, summary in zip(self.summary_nodes, summaries, strict=True):
            node.summary = summary
            node.summary_index = self.add_text(summary)
        return WorkUnit(self.payload.path, self.texts, self.payload)


class FilePreparer:
    def __init__(
        self,
        snapshot: Snapshot,
        *,
        max_embed_chars: int = 2000,
        code_text: str = DEFAULT_CODE_EMBED_TEXT,
    ) -> None:
        self._snapshot = snapshot
        self._max_chars = max_embed_chars
        self._code_text = CODE_EMBED_TEXTS[code_text]
        self._local = threading.local()

    def _parser(self) -> CodeParser:
        parser: CodeParser | None = getattr(self._local, "parser", None)
        if parser is None:
            parser = CodeParser()
            self._local.parser = parser
        return parser

    def prepare(self, source: SourceFile) -> Prepared:
        """The file's records, from one read of it (snapshots.Unreadable when it can no
        longer be read as listed); its hash and size are those of the bytes read."""
        loaded = self._snapshot.load(source)
        data, times = loaded.data, loaded.times
        source = replace(source, size=len(data), content_hash=loaded.content_hash)
        text = data.decode("utf-8", errors="replace")
        if is_markdown(source.path):
            return self._markdown(source, text, times)
        parsed = self._parser().parse(source.path, data)
        if parsed is None:
            return self._plain(source, text, times)
        payload = FilePayload(
            source.path,
            source.content_hash,
            parsed.language,
            "code",
            source.size,
            times.newest,
            content=text,
            bindings=dict(parsed.bindings),
        )
        prepared = Prepared(payload)
        calls: dict[str, dict[str, None]] = {}  # ordered sets
        members: dict[str, list[str]] = {}
        for edge in parsed.edges:
            payload.edges.append(
                EdgeRecord(edge.src, edge.dst_name, edge.kind, edge.lines, edge.receiver)
            )
            if edge.kind == "calls":
                # A name called through receivers of two types is two edges, one call.
                calls.setdefault(edge.src, {})[edge.dst_name] = None
            elif edge.kind == "contains":
                members.setdefault(edge.src, []).append(edge.dst_name.rsplit(".", 1)[-1])
        for node in parsed.nodes:
            created, changed = times.span(node.start_line, node.end_line)
            record = NodeRecord(
                node.qualified_name,
                node.name,
                node.kind,
                node.language,
                node.path,
                node.start_line,
                node.end_line,
                node.signature,
                node.body,
                node.docstring,
                node.parent,
                created,
                changed,
            )
            record.embed_index = prepared.add_text(self._code_text(record)[: self._max_chars])
            payload.nodes.append(record)
            prepared.summary_nodes.append(record)
            prepared.summary_inputs.append(
                SummaryInput(
                    node.qualified_name,
                    node.kind,
                    node.language,
                    node.signature,
                    node.docstring,
                    node.body,
                    tuple(calls.get(node.qualified_name, ())),
                    tuple(members.get(node.qualified_name, ())),
                )
            )
        return prepared

    def _markdown(self, source: SourceFile, text: str, times: LineTimes) -> Prepared:
        payload = FilePayload(
            source.path,
            source.content_hash,
            "markdown",
            "repo_docs",
            source.size,
            times.newest,
            content=text,
        )
        prepared = Prepared(payload)
        for chunk in chunk_markdown(source.path, text):
            doc = DocRecord(
                chunk.path,
                chunk.heading_path,
                chunk.start_line,
                chunk.end_line,
                chunk.body,
                times.span(chunk.start_line, chunk.end_line)[1],
            )
            doc.embed_index = prepared.add_text(chunk.embedding_text()[: self._max_chars])
            payload.docs.append(doc)
        return prepared

    def _plain(self, source: SourceFile, text: str, times: LineTimes) -> Prepared:
        language = text_language(source.path)
        ext = posixpath.splitext(source.path)[1].lower()
        prose = ext in _PROSE_EXTENSIONS
        store = "repo_docs" if prose else "code"
        payload = FilePayload(
            source.path,
            source.content_hash,
            language,
            store,
            source.size,
            times.newest,
            content=text,
        )
        prepared = Prepared(payload)
        name = posixpath.basename(source.path)
        for chunk in chunk_plain_text(source.path, text):
            created, changed = times.span(chunk.start_line, chunk.end_line)
            if prose:
                doc = DocRecord(
                    chunk.path, (), chunk.start_line, chunk.end_line, chunk.text, changed
                )
                doc.embed_index = prepared.add_text(f"{name}\n{chunk.text}"[: self._max_chars])
                payload.docs.append(doc)
                continue
            # Plain chunks live in the code store with kind 'chunk'; the qualified name
            # carries the path and line range so symbol search can still point at them.
            record = NodeRecord(
                f"{chunk.path}#L{chunk.start_line}-L{chunk.end_line}",
                name,
                "chunk",
                language,
                chunk.path,
                chunk.start_line,
                chunk.end_line,
                "",
                chunk.text,
                None,
                None,
                created,
                changed,
            )
            record.embed_index = prepared.add_text(f"{name}\n{chunk.text}"[: self._max_chars])
            payload.nodes.append(record)
        return prepared


def prepare_document(
    path: str, text: str, content_hash: str, updated_at: datetime, max_embed_chars: int = 2000
) -> Prepared:
    """A collection document: markdown chunks, all stamped with the document's time."""
    payload = FilePayload(
        path,
        content_hash,
        "markdown",
        "md_collections",
        len(text.encode()),
        updated_at,
        content=text,
    )
    prepared = Prepared(payload)
    for chunk in chunk_markdown(path, text):
        doc = DocRecord(
            chunk.path,
            chunk.heading_path,
            chunk.start_line,
            chunk.end_line,
            chunk.body,
            updated_at,
        )
        doc.embed_index = prepared.add_text(chunk.embedding_text()[:max_embed_chars])
        payload.docs.append(doc)
    return prepared

"""Retrieval's embedding space: its vector columns, and the text each vector is recomputed
from when `cograph reembed` moves them to another model (the same text the indexer
embedded: indexing/prepare.py, cut to RETRIEVAL_EMBED_MAX_CHARS).

The rule and the machinery are in cograph_api.embedding_space; this module says which
columns retrieval has and how their text is rebuilt from what the index stores.
"""

from __future__ import annotations

import posixpath
import sys

import asyncpg

from cograph_api.embedding_space import SpaceSpec, VectorColumn, Work, reembed_main
from retrieval.indexing.markdown import is_markdown
from retrieval.indexing.prepare import CODE_EMBED_TEXTS
from retrieval.indexing.records import NodeRecord
from retrieval.settings import IndexSettings
from svckit.config import Env

SPEC = SpaceSpec(
    "retrieval",
    (
        VectorColumn("code_nodes", "embedding", "code_nodes_embedding"),
        VectorColumn("code_nodes", "summary_embedding", "code_nodes_summary_embedding"),
        VectorColumn("repo_docs", "embedding", "repo_docs_embedding"),
        VectorColumn("md_collection_chunks", "embedding", "md_collection_chunks_embedding"),
    ),
)


def code_text(row: asyncpg.Record | dict[str, object], variant: str, max_chars: int) -> str:
    """A code node's embedded text, as FilePreparer built it."""
    if row["kind"] == "chunk":  # a plain-text chunk: file name, then the lines
        return f"{row['name']}\n{row['body']}"[:max_chars]
    node = NodeRecord(
        str(row["qualified_name"]),
        str(row["name"]),
        str(row["kind"]),
        "",
        "",
        0,
        0,
        str(row["signature"]),
        str(row["body"]),
        row["docstring"] if isinstance(row["docstring"], str) else None,
        None,
        None,
        None,
    )
    return CODE_EMBED_TEXTS[variant](node)[:max_chars]


def heading_text(heading_path: list[str] | tuple[str, ...], body: str) -> str:
    """A markdown chunk's embedded text (markdown.Chunk.embedding_text)."""
    if not heading_path:
        return body
    return " > ".join(heading_path) + "\n" + body


def repo_doc_text(row: asyncpg.Record | dict[str, object], max_chars: int) -> str:
    path = str(row["path"])
    body = str(row["body"])
    headings = row["heading_path"]
    assert isinstance(headings, list | tuple)
    if is_markdown(path):
        return heading_text(list(headings), body)[:max_chars]
    # Other prose (.txt, .rst, ...) is chunked by lines, each led by the file name.
    return f"{posixpath.basename(path)}\n{body}"[:max_chars]


def collection_text(row: asyncpg.Record | dict[str, object], max_chars: int) -> str:
    headings = row["heading_path"]
    assert isinstance(headings, list | tuple)
    return heading_text(list(headings), str(row["body"]))[:max_chars]


def works(code_variant: str, max_chars: int) -> list[Work]:
    """The refill plan of every vector column (cograph_api.embedding_space.reembed)."""
    code, summary, docs, chunks = SPEC.columns
    return [
        Work(
            code,
            "id",
            ("kind", "name", "qualified_name", "signature", "body", "docstring"),
            lambda row: code_text(row, code_variant, max_chars),
        ),
        Work(summary, "id", ("summary",), lambda row: str(row["summary"]), "summary IS NOT NULL"),
        Work(
            docs, "id", ("path", "heading_path", "body"), lambda row: repo_doc_text(row, max_chars)
        ),
        Work(chunks, "id", ("heading_path", "body"), lambda row: collection_text(row, max_chars)),
    ]


def _plan(env: Env) -> list[Work]:
    index = IndexSettings.from_env(env)
    return works(index.code_embed_text, index.embed_max_chars)


def main(argv: list[str] | None = None) -> int:
    """`python -m retrieval.embedding_space` (what `cograph reembed` runs)."""
    return reembed_main(SPEC, _plan, argv)


if __name__ == "__main__":
    sys.exit(main())

"""The embedding space's pure logic: the verdict, the SQL it builds from code-given names,
the text a re-embed recomputes each vector from (the indexer's own), /readyz."""

from __future__ import annotations

from pathlib import Path

import pytest

from cograph_api.embedder_client import Identity
from cograph_api.embedding_space import SpaceRecord, VectorColumn, Work, verdict
from cograph_cli.main import COMMANDS, build_parser
from commons.embedding import embedding_text
from commons.embedding_space import works as commons_works
from gateway.routes_health import readiness
from retrieval.embedding_space import SPEC, code_text, collection_text, repo_doc_text, works
from retrieval.indexing.prepare import CODE_EMBED_TEXTS, FilePreparer, prepare_document
from retrieval.indexing.snapshots import DirectorySnapshot
from retrieval.indexing.sources import SkipRules, SourceFile

MINI = Identity("all-MiniLM-L6-v2", 384)
OTHER = Identity("text-embedding-3-small", 1536)


def test_verdict() -> None:
    empty = SpaceRecord(None, None)
    assert verdict(empty, OTHER) is None  # the first writer records its model
    assert verdict(SpaceRecord("all-MiniLM-L6-v2", 384), MINI) is None
    assert verdict(SpaceRecord("all-MiniLM-L6-v2", 384), None) is None  # not reached yet
    reason = verdict(SpaceRecord("all-MiniLM-L6-v2", 384), OTHER)
    assert reason is not None and "cograph reembed" in reason and "1536" in reason
    # Same name, other dimension: still another space.
    assert verdict(SpaceRecord("all-MiniLM-L6-v2", 384), Identity(MINI.model, 768))
    # While a re-embed runs, vectors are off whatever the embedder serves.
    moving = SpaceRecord("all-MiniLM-L6-v2", 384, OTHER)
    for identity in (MINI, OTHER, None):
        assert "in progress" in (verdict(moving, identity) or "")


@pytest.mark.parametrize("name", ["posts; DROP TABLE x", "Posts", "a-b", "", "1abc"])
def test_only_plain_identifiers_reach_sql(name: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        VectorColumn(name, "embedding", "idx")
    with pytest.raises(ValueError, match="identifier"):
        VectorColumn("posts", name, "idx")


def test_work_sql() -> None:
    work = Work(VectorColumn("t", "v", "t_v"), "id", ("a", "b"), str, "a IS NOT NULL")
    assert work.select_sql(False) == (
        "SELECT id AS key, a, b FROM t WHERE v IS NULL AND (a IS NOT NULL) ORDER BY id LIMIT $1"
    )
    assert "AND id > $2" in work.select_sql(True)
    assert work.update_sql() == "UPDATE t SET v = $2 WHERE id = $1 AND v IS NULL"
    assert work.count_sql().startswith("SELECT count(*) FROM t WHERE v IS NULL")


PY = '''"""Configuration."""


class ParseConfig:
    """Parses configuration files."""

    def parse(self, text: str) -> dict:
        return {"raw": text}
'''
MD = "# Guide\n\nIntro.\n\n## Setup\n\nRun make.\n"
TXT = "plain notes\n" * 5


@pytest.mark.parametrize("variant", sorted(CODE_EMBED_TEXTS))
def test_reembed_texts_are_the_indexers(tmp_path: Path, variant: str) -> None:
    """Each stored row gives back exactly the text the indexer embedded for it."""
    (tmp_path / "pkg").mkdir()
    files = {"pkg/config.py": PY, "docs/guide.md": MD, "notes.txt": TXT, "conf.ini": "a=1\n"}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    preparer = FilePreparer(
        DirectorySnapshot(tmp_path, SkipRules()), max_embed_chars=60, code_text=variant
    )
    checked = 0
    for path, text in files.items():
        prepared = preparer.prepare(SourceFile(path, len(text), "h"))
        payload = prepared.payload
        for node in payload.nodes:
            row: dict[str, object] = {
                "kind": node.kind,
                "name": node.name,
                "qualified_name": node.qualified_name,
                "signature": node.signature,
                "body": node.body,
                "docstring": node.docstring,
            }
            assert node.embed_index is not None
            assert code_text(row, variant, 60) == prepared.texts[node.embed_index]
            checked += 1
        for doc in payload.docs:
            doc_row: dict[str, object] = {
                "path": doc.path,
                "heading_path": list(doc.heading_path),
                "body": doc.body,
            }
            assert doc.embed_index is not None
            assert repo_doc_text(doc_row, 60) == prepared.texts[doc.embed_index]
            checked += 1
    assert checked >= 6
    document = prepare_document("faq.md", MD, "h", None, 40)  # type: ignore[arg-type]
    for doc in document.payload.docs:
        chunk_row: dict[str, object] = {"heading_path": list(doc.heading_path), "body": doc.body}
        assert doc.embed_index is not None
        assert collection_text(chunk_row, 40) == document.texts[doc.embed_index]


def test_every_vector_column_has_a_refill() -> None:
    assert [w.column for w in works("name_signature_body", 2000)] == list(SPEC.columns)
    (notes,) = commons_works()
    assert notes.text({"title": "T", "body": "B"}) == embedding_text("T", "B")


def test_readiness_reports_a_mismatch_as_degraded() -> None:
    serving = {"retrieval": "serving", "commons": "serving", "database": "serving"}
    status, body = readiness(serving, {"retrieval": "serving", "commons": "serving"})
    assert status == 200 and body["status"] == "ready"
    assert "embedding_space" not in body["dependencies"]  # listed only when degraded
    status, body = readiness(
        serving, {"retrieval": "embedding_model_mismatch", "commons": "serving"}
    )
    assert status == 200 and body["status"] == "degraded"
    assert body["dependencies"]["embedding_space"] == "embedding_model_mismatch"
    assert body["embedding_model_mismatch"] == ["retrieval"]
    assert "cograph reembed" in body["detail"]
    # Without answers to the check (older backends) nothing is added.
    status, body = readiness(serving, {})
    assert "embedding_space" not in body["dependencies"] and body["status"] == "ready"


def test_reembed_is_a_cli_command() -> None:
    assert COMMANDS["reembed"] == "cograph_cli.reembed_cmd"
    args = build_parser("reembed").parse_args(["reembed", "--only", "commons"])
    assert args.only == "commons" and args.batch == 64

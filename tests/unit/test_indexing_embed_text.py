"""What a code node's vector is computed from, per RETRIEVAL_CODE_EMBED_TEXT."""

from __future__ import annotations

from dataclasses import replace

import pytest

from retrieval.indexing.prepare import (
    CODE_EMBED_TEXTS,
    DEFAULT_CODE_EMBED_TEXT,
    code_embedding_text,
)
from retrieval.indexing.records import NodeRecord
from retrieval.settings import IndexSettings
from svckit.config import ConfigError, Env

NODE = NodeRecord(
    qualified_name="billing.ParseConfig.load_file",
    name="load_file",
    kind="method",
    language="python",
    path="billing/config.py",
    start_line=3,
    end_line=6,
    signature="def load_file(self, path: str) -> dict:",
    body='def load_file(self, path: str) -> dict:\n    """Reads it."""\n    return {}',
    docstring="Reads it.",
    parent="billing.ParseConfig",
    created_at=None,
    last_changed_at=None,
)


def test_each_variant_says_what_it_embeds() -> None:
    assert code_embedding_text(NODE) == code_embedding_text(NODE, DEFAULT_CODE_EMBED_TEXT)
    assert code_embedding_text(NODE, "name_signature_body") == (
        f"billing.ParseConfig.load_file\n{NODE.signature}\n{NODE.body}"
    )
    assert code_embedding_text(NODE, "words_signature_body").startswith(
        "billing parse config load file\ndef load_file("
    )
    assert code_embedding_text(NODE, "name_signature_docstring") == (
        f"billing.ParseConfig.load_file\n{NODE.signature}\nReads it."
    )
    assert code_embedding_text(NODE, "body") == NODE.body


def test_a_repeated_names_marker_is_not_embedded() -> None:
    # `#2` marks the second definition of a name in one file (overloads); it is the index's
    # key, not text of the source, and embedding it moved overloads' vectors.
    second = replace(NODE, qualified_name="billing.ParseConfig.load_file#2")
    for variant in ("name_signature_body", "words_signature_body", "name_signature_docstring"):
        assert code_embedding_text(second, variant) == code_embedding_text(NODE, variant)
    assert "#" not in code_embedding_text(second)


def test_the_setting_accepts_only_known_variants() -> None:
    assert IndexSettings.from_env(Env({})).code_embed_text == DEFAULT_CODE_EMBED_TEXT
    for variant in CODE_EMBED_TEXTS:
        chosen = IndexSettings.from_env(Env({"RETRIEVAL_CODE_EMBED_TEXT": variant}))
        assert chosen.code_embed_text == variant
    with pytest.raises(ConfigError, match="RETRIEVAL_CODE_EMBED_TEXT"):
        IndexSettings.from_env(Env({"RETRIEVAL_CODE_EMBED_TEXT": "everything"}))

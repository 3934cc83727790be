"""docs/configuration.md is what scripts/config_docs.py generates from the code, and it names
every variable the code reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripts import config_docs
from scripts.config_docs import DOC, DocsError, Read, generate, record, render, retired

ROOT = Path(__file__).resolve().parents[2]
# How the project's own variables begin; anything else (GIT_*, SSH_*) is not a setting.
_PREFIXES = (
    "COGRAPH", "EMBEDDER", "EMBEDDING", "RETRIEVAL", "ROUTER", "COMMONS", "GATEWAY", "SEARCH",
    "SUMMARIZER", "OTEL",
)  # fmt: skip
_NAME = re.compile(rf"""["']((?:{"|".join(_PREFIXES)})_[A-Z0-9_]+)["']""")


def test_the_committed_file_is_what_the_generator_writes() -> None:
    assert DOC.read_text(encoding="utf-8") == generate(), (
        "docs/configuration.md is out of date: run `python -m scripts.config_docs` "
        "(and give a new variable its meaning in scripts/config_docs.py META)"
    )


def test_every_variable_named_in_the_code_is_documented() -> None:
    documented = {name for reads in record().reads.values() for name in reads} | set(retired())
    named: dict[str, str] = {}
    for folder in ("libs", "services"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _NAME.findall(path.read_text(encoding="utf-8")):
                named.setdefault(name, str(path.relative_to(ROOT)))
    missing = {name: where for name, where in named.items() if name not in documented}
    assert not missing, f"read outside an Env? declare them in config_docs.MANUAL: {missing}"


def test_a_variable_without_a_meaning_fails() -> None:
    recorder = record()
    recorder.note("gateway", Read("GATEWAY_SOMETHING_NEW", "int", 1, 0, 9))
    with pytest.raises(DocsError, match=r"no meaning .* GATEWAY_SOMETHING_NEW"):
        render(recorder)


def test_a_meaning_for_a_variable_nothing_reads_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(config_docs.META, "GATEWAY_GONE", config_docs.Meta("gone"))
    with pytest.raises(DocsError, match="nothing reads: GATEWAY_GONE"):
        render(record())


def test_readers_that_disagree_need_a_stated_default() -> None:
    recorder = record()
    recorder.reads["commons"]["COGRAPH_LOG_LEVEL"] = Read("COGRAPH_LOG_LEVEL", "str", "DEBUG")
    with pytest.raises(DocsError, match="COGRAPH_LOG_LEVEL: readers disagree on its default"):
        render(recorder)

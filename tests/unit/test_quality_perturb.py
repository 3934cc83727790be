"""Signature perturbations and prose clean-up used to build queries."""

from __future__ import annotations

import random

from bench.quality.perturb import (
    clean_prose,
    drop_annotation,
    drop_keyword,
    drop_return,
    first_sentence,
    perturb_signature,
    respace,
    split_params,
)

SIG = "def load(self, path: dict[str, int], strict: bool = True) -> Config:"


def test_split_params_keeps_nested_brackets_whole() -> None:
    parts = split_params(SIG)
    assert parts is not None
    head, params, tail = parts
    assert head == "def load("
    assert [p.strip() for p in params] == ["self", "path: dict[str, int]", "strict: bool = True"]
    assert tail == ") -> Config:"
    assert split_params("class Foo:") is None


def test_drop_annotation_keeps_default() -> None:
    seen = {drop_annotation(SIG, random.Random(seed)) for seed in range(20)}
    assert "def load(self, path, strict: bool = True) -> Config:" in seen
    assert "def load(self, path: dict[str, int], strict=True) -> Config:" in seen
    assert drop_annotation("def f(a, b):", random.Random(0)) is None


def test_drop_keyword_and_return() -> None:
    rng = random.Random(0)
    assert drop_keyword("async def fetch(url):", rng) == "fetch(url):"
    assert drop_keyword("const minimatch = (p) =>", rng) == "minimatch = (p) =>"
    assert drop_keyword("function walk(dir) {", rng) == "walk(dir) {"
    assert drop_keyword("walk(dir)", rng) is None
    assert drop_return(SIG, rng) == "def load(self, path: dict[str, int], strict: bool = True)"
    assert drop_return("def f(a):", rng) is None


def test_respace_changes_spacing_only() -> None:
    for seed in range(6):
        out = respace("def f(a: int, b=1):", random.Random(seed))
        assert out is not None
        assert out.replace(" ", "") == "deff(a:int,b=1):"


def test_perturb_signature_is_seeded_and_labelled() -> None:
    a = perturb_signature(SIG, random.Random(7))
    b = perturb_signature(SIG, random.Random(7))
    assert a == b
    assert a is not None
    text, label = a
    assert text != SIG
    assert all(
        part in ("drop-annotation", "drop-keyword", "drop-return", "respace")
        for part in label.split("+")
    )
    multi = perturb_signature("def f(\n    a: int,\n    b: str,\n) -> None:", random.Random(1))
    assert multi is not None
    assert "\n" not in multi[0]


def test_clean_prose_and_first_sentence() -> None:
    text = "Pass the :class:`~jinja2.runtime.Context` as the **first** `arg`. More here."
    assert clean_prose(text) == "Pass the Context as the first arg. More here."
    assert first_sentence(text) == "Pass the Context as the first arg."
    assert first_sentence("See [the docs](http://x) for e.g. details\n\nNext para.") == (
        "See the docs for e.g. details"
    )
    assert first_sentence("one two three four", max_words=2) == "one two"

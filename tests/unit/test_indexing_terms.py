"""The router corpus computed at index time."""

from __future__ import annotations

from retrieval.indexing.router_corpus import CORPUS_CAP, collection_corpus, repository_corpus


def test_repository_corpus_sources() -> None:
    terms = repository_corpus(
        "github.com/Acme/Billing",
        "main",
        "# Billing\nRetries failed charges." + " padding" * 400 + " zzzlastword",
        [("billing.retry", "billing/retry.py", True), ("billing.retry.Backoff", "x", False)],
        ["billing/retry.py"],
    )
    assert {
        ("label", "github.com/acme/billing"),
        ("label", "acme"),
        ("label", "billing"),
        ("branch", "main"),
        ("readme", "retries"),
        ("path", "billing/retry.py"),
        ("qualified_name", "billing.retry"),
        ("qualified_name", "billing.retry.backoff"),
    } <= terms
    assert ("readme", "zzzlastword") not in terms  # beyond the first 2000 characters


def test_corpus_cap_keeps_breadth() -> None:
    modules = [(f"m{i}", f"m{i}.py", True) for i in range(1000)]
    inner = [(f"m{i}.f{j}", f"m{i}.py", False) for i in range(1000) for j in range(3)]
    paths = [f"m{i}.py" for i in range(1000)]
    terms = repository_corpus("h/o/n", "", "", modules + inner, paths)
    corpus = [t for t in terms if t[0] in ("path", "qualified_name")]
    assert len(corpus) == CORPUS_CAP
    assert ("path", "m749.py") in terms and ("qualified_name", "m749") in terms
    assert not any(t[1].startswith("m") and ".f" in t[1] for t in corpus)


def test_collection_corpus() -> None:
    terms = collection_corpus(
        "Billing-Glossary", "Terms the billing team uses", "a.md: Intro\na.md: Intro > Dunning"
    )
    assert {
        ("label", "billing-glossary"),
        ("description", "billing"),
        ("heading", "dunning"),
        ("heading", "intro"),
        ("path", "a.md"),
    } <= terms

"""Markdown chunked by heading with heading paths; the flattened heading tree."""

from __future__ import annotations

import itertools

from retrieval.indexing.markdown import chunk_markdown, heading_tree, headings

DOC = """Intro before any heading.

# Billing

How billing works.

## Retries

```python
# not a heading
retry()
```

Failed charges retry.

### Backoff
Exponential.

## Empty

# Refunds
Money back.

Setext Title
============

Under setext.
"""


def test_headings_skip_fences_and_read_setext() -> None:
    found = [(h.level, h.title) for h in headings(DOC)]
    assert found == [
        (1, "Billing"),
        (2, "Retries"),
        (3, "Backoff"),
        (2, "Empty"),
        (1, "Refunds"),
        (1, "Setext Title"),
    ]


def test_chunks_carry_heading_paths_and_lines() -> None:
    chunks = chunk_markdown("docs/billing.md", DOC)
    assert [c.heading_path for c in chunks] == [
        (),
        ("Billing",),
        ("Billing", "Retries"),
        ("Billing", "Retries", "Backoff"),
        ("Refunds",),
        ("Setext Title",),
    ]
    retries = chunks[2]
    assert (retries.start_line, retries.end_line) == (7, 15)
    assert retries.body.startswith("## Retries") and "# not a heading" in retries.body
    assert chunks[0].body == "Intro before any heading."
    assert retries.embedding_text().startswith("Billing > Retries\n")


def test_long_sections_split_at_blank_lines() -> None:
    paragraphs = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(10))
    chunks = chunk_markdown("a.md", "# Big\n\n" + paragraphs, max_chars=800)
    assert len(chunks) > 3
    assert all(c.heading_path == ("Big",) for c in chunks)
    assert all(len(c.body) <= 800 for c in chunks)
    for before, after in itertools.pairwise(chunks):
        assert after.start_line > before.end_line


def test_heading_tree_is_flat_and_bounded() -> None:
    tree = heading_tree([("b.md", "# B\n## B1\n"), ("a.md", "# A\n")])
    assert tree == "a.md: A\nb.md: B\nb.md: B > B1"
    big = [(f"d{i}.md", "".join(f"# Heading {j}\n" for j in range(100))) for i in range(100)]
    bounded = heading_tree(big, budget_bytes=1000)
    assert 900 < len(bounded.encode()) <= 1000

"""The commons' embedding space: its one vector column (posts.embedding) and the text a
note's vector is recomputed from when `cograph reembed` moves it to another model (the
same text the note was embedded from: commons.embedding.embedding_text).

The rule and the machinery are in cograph_api.embedding_space.
"""

from __future__ import annotations

import sys
from typing import Any

from cograph_api.embedding_space import SpaceSpec, VectorColumn, Work, reembed_main
from commons.embedding import embedding_text

SPEC = SpaceSpec("commons", (VectorColumn("posts", "embedding", "posts_embedding_hnsw"),))


def works(_env: Any = None) -> list[Work]:
    return [
        Work(
            SPEC.columns[0],
            "id",
            ("title", "body"),
            lambda row: embedding_text(str(row["title"]), str(row["body"])),
        )
    ]


def main(argv: list[str] | None = None) -> int:
    """`python -m commons.embedding_space` (what `cograph reembed` runs)."""
    return reembed_main(SPEC, works, argv)


if __name__ == "__main__":
    sys.exit(main())

"""Real text for benchmarks: chunks of source files installed in this environment."""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path


def code_chunks(count: int, chars: int = 600, seed: int = 7) -> list[str]:
    """`count` slices of real Python source from the standard library, reproducibly sampled."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size > chars)
    rng = random.Random(seed)
    chunks: list[str] = []
    while len(chunks) < count:
        text = rng.choice(files).read_text(errors="replace")
        start = rng.randrange(0, max(1, len(text) - chars))
        chunks.append(text[start : start + chars])
    return chunks


QUERIES = [
    "how does billing retry a failed charge",
    "ParseConfig",
    "func (s *Server) Handle",
    "where are HTTP headers parsed",
    "open a file and read the configuration",
    "thread pool executor shutdown",
    "compute a sha256 digest of a file",
    "format a date in ISO 8601",
]

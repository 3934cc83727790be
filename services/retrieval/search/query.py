"""A validated search request. Every limit is checked here, so the engine can trust it.

Out-of-range values are INVALID_ARGUMENT, never clamped: a caller that asked for 101
results or a 4001-character snippet learns that, instead of silently getting less.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from cograph_api import limits
from retrieval.indexing.refs import scoped_slug
from retrieval.layers import Layer, resolve_layers
from retrieval.search.fusion import STREAM_NAMES, StreamName
from retrieval.search.pipeline import SKIPPABLE, STAGE_NAMES
from retrieval.search.search_settings import (
    SNIPPET_MAX,
    SNIPPET_MIN,
    TOP_K_MAX,
    TOP_K_MIN,
    SearchSettings,
)
from svckit.errors import InvalidArgument


@dataclass(frozen=True)
class SearchQuery:
    text: str
    repo: str | None
    collection: str | None
    layers: frozenset[Layer]
    top_k: int
    snippet_chars: int
    include_graph: bool = False
    as_of: datetime | None = None
    since: datetime | None = None
    until: datetime | None = None
    streams: frozenset[StreamName] = frozenset(STREAM_NAMES)
    skip_rerank: bool = False
    explain: bool = False  # each ranking stage's effect on the answer (pipeline.Trace)
    skip_stages: frozenset[str] = frozenset()  # ranking stages to leave out (evaluation)


def build_query(
    settings: SearchSettings,
    *,
    text: str,
    repo: str = "",
    ref: str = "",
    collection: str = "",
    layers: Iterable[str] = (),
    top_k: int | None = None,
    snippet_chars: int | None = None,
    include_graph: bool = False,
    as_of: datetime | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    streams: Iterable[str] = (),
    skip_rerank: bool = False,
    explain: bool = False,
    skip_stages: Iterable[str] = (),
) -> SearchQuery:
    """Validates and normalises a request; raises InvalidArgument with the reason."""
    query = text.strip()
    if not query:
        raise InvalidArgument("query must not be blank")
    if len(query) > limits.SEARCH_QUERY_MAX_CHARS:
        raise InvalidArgument(
            f"query: must be at most {limits.SEARCH_QUERY_MAX_CHARS} characters (got {len(query)})"
        )
    repo_slug = repo.strip().lower() or None
    collection_name = collection.strip() or None
    if repo_slug and collection_name:
        raise InvalidArgument("give repo or collection, not both")
    for field, value, most in (
        ("repo", repo_slug, limits.SLUG_MAX_CHARS),
        ("collection", collection_name, limits.NAME_MAX_CHARS),
    ):
        if value is not None and len(value) > most:
            raise InvalidArgument(f"{field}: must be at most {most} characters")
    if ref.strip():
        # An indexed ref is searched as its own row (indexing/refs.py); it needs the repo.
        if collection_name:
            raise InvalidArgument("ref is a repository's branch or tag: give repo, not collection")
        repo_slug = scoped_slug(repo_slug or "", ref.strip())
    names = list(layers)
    if len(names) > limits.LAYERS_MAX:
        raise InvalidArgument(f"layers: at most {limits.LAYERS_MAX} layers (got {len(names)})")
    k = settings.default_top_k if top_k is None else top_k
    if not TOP_K_MIN <= k <= TOP_K_MAX:
        raise InvalidArgument(f"top_k must be between {TOP_K_MIN} and {TOP_K_MAX}, got {k}")
    width = settings.default_snippet_chars if snippet_chars is None else snippet_chars
    if not SNIPPET_MIN <= width <= SNIPPET_MAX:
        raise InvalidArgument(
            f"snippet_chars must be between {SNIPPET_MIN} and {SNIPPET_MAX}, got {width}"
        )
    if include_graph and repo_slug is None:
        raise InvalidArgument("include_graph needs a repo: graph expansion is per repository")
    if since is not None and until is not None and since > until:
        raise InvalidArgument("since must not be after until")
    chosen = [name.strip().lower() for name in streams]
    unknown = sorted({name for name in chosen if name not in STREAM_NAMES})
    if unknown:
        raise InvalidArgument(f"unknown stream {', '.join(unknown)}")
    skipped = [name.strip().lower() for name in skip_stages]
    if len(skipped) > len(STAGE_NAMES):
        raise InvalidArgument(
            f"skip_stages: at most {len(STAGE_NAMES)} stages (got {len(skipped)})"
        )
    unknown = sorted({name for name in skipped if name not in SKIPPABLE})
    if unknown:
        shown = ", ".join(name[:40] for name in unknown)
        raise InvalidArgument(
            f"skip_stages: unknown or required stage {shown}; "
            f"one of {', '.join(s for s in STAGE_NAMES if s in SKIPPABLE)}"
        )
    return SearchQuery(
        text=query,
        repo=repo_slug,
        collection=collection_name,
        layers=resolve_layers(names, collection_name is not None),
        top_k=k,
        snippet_chars=width,
        include_graph=include_graph,
        as_of=as_of,
        since=since,
        until=until,
        streams=frozenset(n for n in STREAM_NAMES if n in chosen) or frozenset(STREAM_NAMES),
        skip_rerank=skip_rerank,
        explain=explain,
        skip_stages=frozenset(skipped),
    )

"""Search configuration: fusion, candidate caps, request limits, reranking providers.

Request limits that are part of the contract (query length, top_k, snippet_chars) are
cograph_api.limits' constants, not settings, so a deployment cannot silently change what
callers may send; only the defaults within them are settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cograph_api import limits
from retrieval.layers import Unit, parse_layer_weights
from retrieval.search.fusion import PIN_SCORE, STREAM_NAMES, StreamName
from retrieval.search.query_class import QueryClass
from retrieval.search.ranking import (
    DEFAULT_CLASS_LINES,
    DEFAULT_DOC_STREAM_WEIGHTS,
    DEFAULT_MEMBER_RATIO,
    DEFAULT_STREAM_WEIGHTS,
    DEFAULT_TEST_WEIGHT,
    FusionSettings,
    parse_stream_weights,
)
from svckit.config import ConfigError, Env

TOP_K_MIN, TOP_K_MAX = limits.TOP_K_MIN, limits.TOP_K_MAX
SNIPPET_MIN, SNIPPET_MAX = limits.SNIPPET_CHARS_MIN, limits.SNIPPET_CHARS_MAX
GRAPH_NODE_CAP = 20  # graph expansion returns at most 20 neighbour nodes
# pgvector caps hnsw.ef_search at 1000, and the vector stream needs ef_search >= the cap.
CANDIDATE_CAP_MAX = 1000
RERANK_PROVIDERS = ("none", "local_cross_encoder", "cohere", "voyage", "jina")

_VENDOR_DEFAULTS = {
    # provider: (base URL, model), from each vendor's rerank API reference.
    "cohere": ("https://api.cohere.com", "rerank-v3.5"),
    "voyage": ("https://api.voyageai.com", "rerank-2.5"),
    "jina": ("https://api.jina.ai", "jina-reranker-v2-base-multilingual"),
}


@dataclass(frozen=True)
class RerankSettings:
    enabled: bool
    provider: str  # one of RERANK_PROVIDERS
    threshold: int  # fewer fused candidates than this: no rerank
    top_n: int  # how many of the best fused candidates the reranker sees
    timeout_s: float
    base_url: str | None  # vendor API root; None for none / local_cross_encoder
    api_key: str | None
    model: str
    doc_chars: int  # each candidate's text is cut to this before it is sent

    @classmethod
    def from_env(cls, env: Env) -> RerankSettings:
        provider = env.choice("RETRIEVAL_RERANK_PROVIDER", "none", RERANK_PROVIDERS)
        url, model = _VENDOR_DEFAULTS.get(provider, (None, ""))
        return cls(
            enabled=env.bool("RETRIEVAL_RERANK_ENABLED", False),
            provider=provider,
            threshold=env.int("RETRIEVAL_RERANK_THRESHOLD", 50, min=0, max=100_000),
            top_n=env.int("RETRIEVAL_RERANK_TOP_N", 50, min=1, max=1000),
            timeout_s=env.float("RETRIEVAL_RERANK_TIMEOUT_S", 5.0, min=0.01),
            base_url=env.optional_str("RETRIEVAL_RERANK_URL") or url,
            api_key=env.optional_str("RETRIEVAL_RERANK_API_KEY"),
            model=env.str("RETRIEVAL_RERANK_MODEL", model or "cross-encoder"),
            doc_chars=env.int("RETRIEVAL_RERANK_DOC_CHARS", 2000, min=64, max=100_000),
        )


DEFAULT_RRF_K = 10
# Candidates each stream keeps before fusion (RETRIEVAL_CANDIDATE_CAP). 100, not 300: the
# same quality in one run of each (unseen corpora: every cell within -0.008..+0.002 MRR@10;
# package set: held-out equal) for a sixth of the vector streams' database time and a
# third of fusion's (bench/notes/search-latency.md, "Fewer round trips ... and the
# candidate cap").
DEFAULT_CANDIDATE_CAP = 100
# The settings that shape the ranking (issue 30: at most eight). Everything else a ranking
# experiment needs is per request: `skip_stages`, `streams`, `skip_rerank`.
RANKING_SETTINGS = (
    "RETRIEVAL_RRF_K",
    "RETRIEVAL_CANDIDATE_CAP",
    "RETRIEVAL_STREAM_WEIGHTS",
    "RETRIEVAL_DOC_STREAM_WEIGHTS",
    "RETRIEVAL_LAYER_WEIGHTS",
    "RETRIEVAL_CONTAINMENT_MEMBER_RATIO",
    "RETRIEVAL_CONTAINMENT_CLASS_LINES",
    "RETRIEVAL_TEST_CODE_WEIGHT",
)
# Settings that each restored an earlier ranking, removed with it: one set at start is an
# error, not silently ignored. The stages they switched are skipped per request now.
RETIRED_SETTINGS: dict[str, str] = {
    "RETRIEVAL_CONTAINMENT": 'a request\'s `skip_stages: ["containment"]` does what `off` did; '
    "`member` and `better` are gone (the adaptive policy is the measured one)",
    "RETRIEVAL_CODE_QUERY_DOC_WEIGHT": "nothing: its default, 1, changed nothing",
    "RETRIEVAL_LEXICAL_SCORING": "nothing: the lexical stream always ranks by BM25",
    "RETRIEVAL_NAME_WORDS": '`skip_stages: ["name_words"]` does what `false` did',
    "RETRIEVAL_OVERLOAD_ORDER": '`skip_stages: ["overload_order"]` does what `fused` did',
    "RETRIEVAL_OVERLOAD_SUMMARIES": '`skip_stages: ["shared_summaries"]` does what `own` did',
    "RETRIEVAL_STORE_FUSION": "nothing: each stream ranks code and documents together",
    "RETRIEVAL_LEXICAL_SPLIT_IDENTIFIERS": "nothing: code tsvectors and code queries always "
    "split identifiers (`ParseConfig` meets `parse config`)",
}


@dataclass(frozen=True)
class SearchSettings:
    rrf_k: int
    candidate_cap: int  # each stream is truncated to this before fusion
    streams_concurrent: bool  # false runs streams one after another (benchmarking)
    default_top_k: int
    default_snippet_chars: int
    pool_size: int  # connections; a concurrent search holds one per stream and store
    rerank: RerankSettings
    # Multipliers on fused scores by layer before stores are merged; empty: all 1.
    layer_weights: Mapping[Unit, float] = field(default_factory=dict)
    # Per query class stream weights, containment and test code weights.
    fusion: FusionSettings = field(default_factory=FusionSettings)

    @classmethod
    def from_env(cls, env: Env) -> SearchSettings:
        env.refuse(
            RETIRED_SETTINGS,
            "no longer settings: each restored an earlier ranking; a request skips a ranking "
            'stage instead (skip_stages; README.md, "How ranking works")',
        )
        settings = cls(
            # 10, not the customary 60: on the held-out half of bench.quality's queries k=10 gains
            # overall MRR@10 and loses on no query class (bench/notes/quality.md, "How the
            # fused figures got here").
            rrf_k=env.int("RETRIEVAL_RRF_K", DEFAULT_RRF_K, min=1, max=100_000),
            candidate_cap=env.int(
                "RETRIEVAL_CANDIDATE_CAP", DEFAULT_CANDIDATE_CAP, min=1, max=CANDIDATE_CAP_MAX
            ),
            streams_concurrent=env.bool("RETRIEVAL_STREAMS_CONCURRENT", True),
            default_top_k=env.int(
                "RETRIEVAL_TOP_K", limits.TOP_K_DEFAULT, min=TOP_K_MIN, max=TOP_K_MAX
            ),
            default_snippet_chars=env.int(
                "RETRIEVAL_SNIPPET_CHARS",
                limits.SNIPPET_CHARS_DEFAULT,
                min=SNIPPET_MIN,
                max=SNIPPET_MAX,
            ),
            pool_size=env.int("RETRIEVAL_DB_POOL_SIZE", 20, min=2, max=500),
            rerank=RerankSettings.from_env(env),
            layer_weights=_layer_weights(env),
            fusion=_fusion(env),
        )
        worst = settings.highest_fused_score()
        if worst >= PIN_SCORE:
            raise ConfigError(
                "RETRIEVAL_STREAM_WEIGHTS, RETRIEVAL_DOC_STREAM_WEIGHTS, "
                "RETRIEVAL_LAYER_WEIGHTS, RETRIEVAL_TEST_CODE_WEIGHT "
                "and RETRIEVAL_RRF_K together allow a fused "
                f"score of {worst:g}, at or above the {PIN_SCORE:g} an exact symbol match is "
                "pinned by: lower the weights or raise RETRIEVAL_RRF_K"
            )
        return settings

    def highest_fused_score(self) -> float:
        """The most a result's fused score can be before pinning: every stream ranks it
        first at the heaviest class's weights, times the largest layer weight and the test
        code weight. Pinned results must stay above it, so their score agrees with the order
        (pipeline.py, the `pin` stage)."""
        fusion = self.fusion
        classes = [*fusion.stream_weights.values(), *fusion.doc_stream_weights.values(), {}]
        streams = max(sum(weights.get(s, 1.0) for s in STREAM_NAMES) for weights in classes)
        layer = max([1.0, *self.layer_weights.values()])
        item = max(1.0, fusion.test_weight)
        return streams / (self.rrf_k + 1) * layer * item


def _stream_weights(env: Env, name: str, default: str) -> dict[QueryClass, dict[StreamName, float]]:
    try:
        return parse_stream_weights(env.str(name, default))
    except ValueError as err:
        raise ConfigError(f"{name}: {err}") from None


def _fusion(env: Env) -> FusionSettings:
    return FusionSettings(
        stream_weights=_stream_weights(env, "RETRIEVAL_STREAM_WEIGHTS", DEFAULT_STREAM_WEIGHTS),
        doc_stream_weights=_stream_weights(
            env, "RETRIEVAL_DOC_STREAM_WEIGHTS", DEFAULT_DOC_STREAM_WEIGHTS
        ),
        member_ratio=env.float(
            "RETRIEVAL_CONTAINMENT_MEMBER_RATIO", DEFAULT_MEMBER_RATIO, min=0.0, max=100.0
        ),
        class_lines=env.int(
            "RETRIEVAL_CONTAINMENT_CLASS_LINES", DEFAULT_CLASS_LINES, min=0, max=1_000_000
        ),
        test_weight=env.float(
            "RETRIEVAL_TEST_CODE_WEIGHT", DEFAULT_TEST_WEIGHT, min=0.01, max=100.0
        ),
    )


def _layer_weights(env: Env) -> dict[Unit, float]:
    name = "RETRIEVAL_LAYER_WEIGHTS"
    try:
        return parse_layer_weights(env.str(name, ""))
    except ValueError as err:
        raise ConfigError(f"{name}: {err}") from None

"""The ranking expression, strategy choice, SQL shape and settings defaults."""

from __future__ import annotations

import math

import pytest

from commons.embedding import MAX_EMBED_CHARS, embedding_text
from commons.ranking import (
    CHANGED_STATUSES,
    RankingWeights,
    Strategy,
    blended_score,
    choose_strategy,
    ef_search_for,
)
from commons.settings import CommonsSettings
from commons.store import AnchorScope, scope_args, search_sql
from svckit.config import ConfigError, Env
from tests.internal_auth import with_secret

W = RankingWeights()


def test_vote_term_is_logarithmic_as_the_spec_says() -> None:
    assert blended_score(0.5, 10, W) - blended_score(0.5, 0, W) == pytest.approx(0.36, abs=0.005)
    assert blended_score(0.5, 100, W) - blended_score(0.5, 10, W) == pytest.approx(0.33, abs=0.01)


def test_downvotes_floor_at_zero() -> None:
    assert blended_score(0.4, -50, W) == blended_score(0.4, 0, W) == pytest.approx(0.4)


def test_weights_apply() -> None:
    weights = RankingWeights(semantic=2.0, votes=1.0)
    assert blended_score(0.25, 3, weights) == pytest.approx(0.5 + math.log(4))


def test_a_note_whose_code_changed_sinks_by_its_weight() -> None:
    assert blended_score(0.5, 0, W) - blended_score(0.5, 0, W, changed=True) == pytest.approx(0.1)
    # About one up-vote: an up-voted changed note and an equal fresh one are near level.
    assert blended_score(0.5, 1, W, changed=True) == pytest.approx(
        blended_score(0.5, 0, W), abs=0.01
    )
    assert blended_score(0.5, 0, RankingWeights(changed_anchors=0.0), changed=True) == 0.5
    # Moved is not a change of what the note describes.
    assert "moved" not in CHANGED_STATUSES and "fresh" not in CHANGED_STATUSES


def test_the_scope_filter_follows_its_parameters() -> None:
    scope = AnchorScope(7, "billing", "refund")
    exact = search_sql(Strategy.EXACT, 1, scope)
    # $7 is the phrase, then the repository, the path and its prefix, the name and suffix.
    assert "a.repository_id = $8::bigint" in exact
    assert "coalesce(a.moved_path, a.path) = $9::text" in exact
    assert "LIKE $10::text" in exact and "= $11::text" in exact and "LIKE $12::text" in exact
    assert scope_args(scope) == [7, "billing", "billing/%", "refund", "%.refund"]
    assert scope_args(AnchorScope(7, "a_b", "")) == [7, "a_b", "a\\_b/%"]
    two_stage = search_sql(Strategy.TWO_STAGE, 0, AnchorScope(7, "", "x"))
    assert "a.repository_id = $8::bigint" in two_stage and "= $9::text" in two_stage
    assert "post_anchors" not in search_sql(Strategy.EXACT, 0).split("ranked AS")[1]


def test_strategy_switches_at_the_threshold() -> None:
    assert choose_strategy(199_999, 200_000) is Strategy.EXACT
    assert choose_strategy(200_000, 200_000) is Strategy.TWO_STAGE
    assert choose_strategy(0, 0) is Strategy.TWO_STAGE


def test_ef_search_covers_k_within_pgvector_bounds() -> None:
    assert ef_search_for(10) == 40
    assert ef_search_for(400) == 400
    assert ef_search_for(5000) == 1000


def test_one_indexable_filter_per_phrase_and_none_without() -> None:
    assert "ILIKE" not in search_sql(Strategy.EXACT, 0)
    exact = search_sql(Strategy.EXACT, 2)
    assert "commons_haystack(p.title, p.body, p.tags) ILIKE $7::text" in exact
    assert "commons_haystack(p.title, p.body, p.tags) ILIKE $8::text" in exact
    assert exact.count("ILIKE") == 2
    assert search_sql(Strategy.FILTERED, 2) == exact
    two_stage = search_sql(Strategy.TWO_STAGE, 1)
    assert "ILIKE $8::text" in two_stage and two_stage.count("ILIKE") == 1
    assert "ORDER BY p.embedding <=> $1::vector" in two_stage


def test_embedding_text_joins_title_and_body_and_truncates() -> None:
    assert embedding_text("T", "B") == "T\n\nB"
    assert len(embedding_text("T", "x" * 20_000)) == MAX_EMBED_CHARS


def test_settings_defaults_and_fail_fast() -> None:
    settings = CommonsSettings.from_env(
        Env(with_secret({"COGRAPH_DATABASE_URL": "postgresql://x/y"}))
    )
    assert settings.address == "127.0.0.1:50054"
    assert settings.embedder_addr == "127.0.0.1:50051"
    assert settings.embedder_timeout_s == 2.0
    assert settings.search_limit == 10
    assert settings.body_snippet == 1200
    assert settings.weights == RankingWeights(1.0, 0.15, 0.1)
    with pytest.raises(ConfigError, match="COGRAPH_DATABASE_URL"):
        CommonsSettings.from_env(Env({}))
    with pytest.raises(ConfigError, match="SEARCH_LIMIT"):
        CommonsSettings.from_env(
            Env(with_secret({"COGRAPH_DATABASE_URL": "x", "SEARCH_LIMIT": "0"}))
        )

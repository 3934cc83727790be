"""An exact symbol match is pinned above every result whatever the weights: settings that
would let a fused score reach the pin are refused at start, naming what to change."""

from __future__ import annotations

import pytest

from retrieval.search.fusion import PIN_SCORE
from retrieval.search.search_settings import SearchSettings
from svckit.config import ConfigError, Env


def settings(**env: str) -> SearchSettings:
    return SearchSettings.from_env(Env(env))


def test_the_defaults_stay_far_below_the_pin() -> None:
    # Three streams at most 1/(k + 1) each, weights about 1.
    assert 0 < settings().highest_fused_score() < 1


def test_the_bound_multiplies_every_weight() -> None:
    base = settings(
        RETRIEVAL_RRF_K="1", RETRIEVAL_STREAM_WEIGHTS="", RETRIEVAL_DOC_STREAM_WEIGHTS=""
    )
    assert base.highest_fused_score() == pytest.approx(3 / 2)
    heavier = settings(
        RETRIEVAL_RRF_K="1",
        RETRIEVAL_STREAM_WEIGHTS="prose:vector=5",
        RETRIEVAL_DOC_STREAM_WEIGHTS="",
        RETRIEVAL_LAYER_WEIGHTS="repo_doc=4",
        RETRIEVAL_TEST_CODE_WEIGHT="3",
    )
    assert heavier.highest_fused_score() == pytest.approx((5 + 1 + 1) / 2 * 4 * 3)


def test_weights_that_reach_the_pin_are_refused_at_its_edge() -> None:
    # (5 + 5 + 5) / (k + 1) * 100 * item: 750 * item; at item 1.3333 it is just below.
    common = {
        "RETRIEVAL_RRF_K": "1",
        "RETRIEVAL_STREAM_WEIGHTS": "prose:vector=5,lexical=5,symbol=5",
        "RETRIEVAL_LAYER_WEIGHTS": "ast_summary=100",
    }
    below = settings(**common, RETRIEVAL_TEST_CODE_WEIGHT="1.3333")
    assert below.highest_fused_score() < PIN_SCORE
    with pytest.raises(ConfigError) as refused:
        settings(**common, RETRIEVAL_TEST_CODE_WEIGHT="1.3334")
    message = str(refused.value)
    assert "RETRIEVAL_TEST_CODE_WEIGHT" in message and "pinned" in message
    assert "1000.05" in message  # the score those weights allow

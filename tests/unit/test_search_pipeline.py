"""The ranking pipeline: its stages listed once, run in that order, skipped and explained."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from cograph_api import limits
from retrieval.layers import Store
from retrieval.search.fusion import Span, StreamHit, StreamName
from retrieval.search.pipeline import (
    SKIPPABLE,
    STAGE_NAMES,
    STAGES,
    Trace,
    effects,
    key_of,
    rank,
)
from retrieval.search.query import build_query
from retrieval.search.ranking import FusionPlan, default_fusion, plan_fusion
from retrieval.search.search_settings import RANKING_SETTINGS, SearchSettings
from svckit.config import Env
from svckit.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[2]
FILE = "pkg/timer.py"
MODULE = Span(1, FILE, 1, 40, "module", "pkg.timer")
CLASS = Span(1, FILE, 5, 30, "class", "pkg.timer.Timer")
METHOD = Span(1, FILE, 10, 20, "method", "pkg.timer.Timer.refresh")
# Stored as test code by the indexer (code_nodes.is_test).
TEST = Span(1, "tests/test_timer.py", 1, 9, "function", "tests.test_timer.test_refresh", True)
NAMED = Span(1, "pkg/util.py", 1, 5, "function", "pkg.util.timer")

Lists = dict[Store, dict[StreamName, list[StreamHit]]]


def lists() -> Lists:
    """A module, its class and the class's method, a test, and a function the query names."""
    return {
        "code": {
            "vector": [
                StreamHit("body", 1, 0.9, 0, MODULE),
                StreamHit("body", 4, 0.85, 0, TEST),
                StreamHit("body", 3, 0.8, 0, METHOD),
                StreamHit("body", 2, 0.7, 0, CLASS),
                StreamHit("body", 5, 0.6, 0, NAMED),
            ],
            "lexical": [StreamHit("body", 3, 9.0, 0, METHOD), StreamHit("body", 1, 8.0, 0, MODULE)],
            "symbol": [StreamHit("body", 5, 1.0, 2, NAMED)],
        }
    }


def test_every_stage_is_described_in_a_line_with_evidence_that_exists() -> None:
    assert tuple(stage.name for stage in STAGES) == STAGE_NAMES
    assert len(set(STAGE_NAMES)) == len(STAGE_NAMES)
    assert frozenset(STAGE_NAMES) - {"fusion"} == SKIPPABLE
    # The contract's list (REST and the CLI validate against it) is the pipeline's, in order.
    assert tuple(name for name in STAGE_NAMES if name in SKIPPABLE) == limits.SKIPPABLE_STAGES
    for stage in STAGES:
        assert stage.when and stage.does and stage.evidence
        cited = re.match(r"([\w./-]+\.md)", stage.evidence)
        if cited is None:  # an operator's setting, not a measured rule
            assert stage.name == "layer_weights"
            continue
        text = (ROOT / cited.group(1)).read_text(encoding="utf-8")
        for heading in re.findall(r'"([^"]+)"', stage.evidence):
            assert re.search(rf"^#+ .*{re.escape(heading)}", text, re.M), (stage.name, heading)


def test_rank_runs_the_stages_in_their_listed_order_and_says_what_each_did() -> None:
    plan = plan_fusion("how is the timer refreshed", 10, 300, default_fusion())
    trace = Trace()
    ranked = rank(lists(), plan, trace)
    assert [run.name for run in trace.runs] == list(STAGE_NAMES)
    runs = {run.name: run for run in trace.runs}
    assert runs["fusion"].applied and runs["fusion"].detail.startswith("prose question")
    assert runs["containment"].applied and "folded" in runs["containment"].detail
    assert runs["test_code"].applied and runs["test_code"].detail.startswith("1 rows")
    assert runs["pin"].applied and not runs["layer_weights"].applied
    # The symbol stream matched a name, so the question's words add nothing.
    assert not runs["name_words"].applied
    assert ranked[0].id == 5  # the exact name, pinned


def test_effects_follow_one_result_through_every_stage_after_fusion() -> None:
    plan = plan_fusion("how is the timer refreshed", 10, 300, default_fusion())
    trace = Trace()
    ranked = rank(lists(), plan, trace)
    assert ranked[0].id == 5
    first = effects(trace, key_of(ranked[0]))
    assert [e.stage for e in first] == ["fusion", "containment", "test_code", "pin"]
    assert first[0].rank_before is None and first[0].score_before is None
    for earlier, later in itertools.pairwise(first):
        assert (later.rank_before, later.score_before) == (earlier.rank_after, earlier.score_after)
    assert first[-1].rank_after == 1 and first[-1].score_after > 1000  # pinned
    assert (first[-1].rank_before or 0) > 1  # the pin, not an earlier stage, put it first
    test = effects(trace, key_of(next(item for item in ranked if item.id == 4)))
    weighed = next(e for e in test if e.stage == "test_code")
    assert weighed.score_after == pytest.approx(weighed.score_before * 0.5)  # type: ignore[operator]


def test_each_skipped_stage_is_left_out_and_says_so() -> None:
    settings = default_fusion()
    full = [
        i.id for i in rank(lists(), plan_fusion("how is the timer refreshed", 10, 300, settings))
    ]
    for name in SKIPPABLE:
        plan = plan_fusion("how is the timer refreshed", 10, 300, settings, skip=frozenset({name}))
        trace = Trace()
        rank(lists(), plan, trace)
        run = next(run for run in trace.runs if run.name == name)
        assert not run.applied and run.detail == "skipped by the request"
    no_pin = plan_fusion("how is the timer refreshed", 10, 300, settings, skip=frozenset({"pin"}))
    assert [i.id for i in rank(lists(), no_pin)] != full
    bare = FusionPlan(10, 300, skip=SKIPPABLE)
    assert len(rank(lists(), bare)) == 5  # fusion alone keeps every candidate


def test_rank_without_a_trace_gives_the_same_order() -> None:
    plan = plan_fusion("how is the timer refreshed", 10, 300, default_fusion())
    plain = [(i.id, i.score) for i in rank(lists(), plan)]
    traced = [(i.id, i.score) for i in rank(lists(), plan, Trace())]
    assert plain == traced


def test_a_request_names_only_stages_that_can_be_skipped() -> None:
    settings = SearchSettings.from_env(Env({}))
    query = build_query(settings, text="x", skip_stages=[" Containment ", "pin"], explain=True)
    assert query.skip_stages == {"containment", "pin"} and query.explain
    for bad in (["fusion"], ["rerank"], ["containment", "x" * 500]):
        with pytest.raises(InvalidArgument, match="skip_stages") as caught:
            build_query(settings, text="x", skip_stages=bad)
        assert len(str(caught.value)) < 300  # a hostile name is not echoed whole
    with pytest.raises(InvalidArgument, match="at most"):
        build_query(settings, text="x", skip_stages=["pin"] * (len(STAGE_NAMES) + 1))


def test_the_readme_lists_the_stages_in_the_order_they_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How ranking works", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert tuple(listed) == STAGE_NAMES
    for name in RANKING_SETTINGS:
        assert f"`{name}`" in section

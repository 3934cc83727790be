"""The unseen corpora's tables: per-cell scores, losses against the baselines, crowding of
the fused top 10, and the held-out check."""

from __future__ import annotations

from bench.quality import unseen_report
from bench.quality.datasets import Answer
from bench.quality.search_client import Row
from bench.quality.unseen import UnseenClass, UQuery
from bench.quality.unseen_run import CONFIGS, UOutcome, contains, crowding
from cograph_text.paths import is_test_path


def _outcome(
    i: int, corpus: str, klass: UnseenClass, language: str, ranks: dict[str, int | None]
) -> UOutcome:
    answer = Answer("r", f"m{i}.py", f"m{i}.f", 10, 20)
    query = UQuery(f"{corpus}-{klass}-{i:04d}", corpus, klass, language, "q", (answer,), i % 2)
    return UOutcome(query, {c: ranks.get(c) for c in CONFIGS}, fused_rows=10)


def test_groups_hold_each_language_and_all_languages() -> None:
    outcomes = [
        _outcome(0, "a", "semantic", "go", {"fused": 1}),
        _outcome(1, "a", "semantic", "rust", {"fused": 2}),
    ]
    grouped = unseen_report.groups(outcomes)
    assert set(grouped) == {
        ("a", "semantic", "all"),
        ("a", "semantic", "go"),
        ("a", "semantic", "rust"),
    }
    assert unseen_report.scores(grouped[("a", "semantic", "all")])["fused"].mrr10 == 0.75


def test_losses_name_the_baseline_fused_is_below_and_flag_significance() -> None:
    outcomes = [
        _outcome(i, "a", "semantic", "go", {"fused": 5, "dense": 1, "bm25": 6, "vector": 5})
        for i in range(20)
    ]
    found = {(x["language"], x["other"]): x for x in unseen_report.losses(outcomes)}
    assert set(found) == {("go", "dense"), ("all", "dense")}
    assert found[("go", "dense")]["delta"] == -0.8
    assert found[("go", "dense")]["significant"]
    mixed = [
        _outcome(i, "a", "semantic", "go", {"fused": 1 if i % 2 else 3, "dense": 2})
        for i in range(4)
    ]
    assert unseen_report.losses(mixed) == []  # fused MRR 0.667 > dense 0.5


def test_containment_and_crowding_of_the_fused_top_ten() -> None:
    module = Row("r", "m0.py", "m0", 1, 50)
    answer = Row("r", "m0.py", "m0.f", 10, 20)
    other = Row("r", "tests/test_m0.py", "test_m0.test_f", 1, 5)
    assert contains(module, answer) and not contains(answer, module)
    assert not contains(answer, answer)
    query = _outcome(0, "a", "semantic", "python", {}).query
    assert crowding(query, [module, other, answer]) == (1, True, 1)
    assert crowding(query, [answer, module]) == (1, False, 0)
    assert crowding(query, [other]) == (0, False, 1)
    assert is_test_path("pkg/tests/x.py") and is_test_path("uuid_test.go")
    assert is_test_path("src/test_version.py") and not is_test_path("src/contest.py")


def test_held_out_check_uses_both_halves() -> None:
    outcomes = [_outcome(i, "a", "semantic", "go", {"fused": 2, "dense": 1}) for i in range(10)]
    check = unseen_report.held_out_check(outcomes, "dense")
    assert check["held_out_gain"] == 0.5 and check["tuning_gain"] == 0.5
    assert check["carries_over"]
    worse = unseen_report.held_out_check(outcomes, "bm25")
    assert not worse["carries_over"]


def test_render_and_payload_carry_every_configuration() -> None:
    outcomes = [
        _outcome(i, "h", "localisation", "python", {"fused": 3, "dense": 1, "bm25": None})
        for i in range(4)
    ]
    text = unseen_report.render(outcomes, ["a note"])
    assert "| h | localisation | **all** | 4 | 0.333 |" in text
    assert "| h | localisation | all | 4 | 0.333 | dense | 1.000 |" in text
    data = unseen_report.payload(outcomes, {"run": {}})
    assert data["metrics"]["h/localisation/all"]["dense"]["mrr@10"] == 1.0
    assert data["halves"]["h/localisation/all"]["fused"]["held_out"]["count"] == 2
    assert unseen_report.per_query(outcomes)[0]["ranks"]["fused"] == 3


def test_held_out_check_can_keep_to_the_prose_classes() -> None:
    outcomes = [_outcome(i, "a", "semantic", "go", {"fused": 2, "dense": 1}) for i in range(10)] + [
        _outcome(i, "a", "symbol", "go", {"fused": 1, "dense": 3}) for i in range(10, 20)
    ]
    assert not unseen_report.held_out_check(outcomes, "dense")["carries_over"]
    prose = unseen_report.held_out_check(outcomes, "dense", classes=unseen_report.PROSE)
    assert prose["carries_over"] and prose["classes"] == ["semantic", "localisation"]

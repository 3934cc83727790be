"""The frozen evaluation split: its files match the manifest, its corpora are what the
README says (one comment-free function a file, licences inside, every answer where the
parser finds it), the builder's text operations, the report's arithmetic, and the refusal
of tuning tools."""

from __future__ import annotations

import json
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from bench.quality import compare, frozen, frozen_build, frozen_report, frozen_run, fusion_sweep
from bench.quality.datasets import Answer
from bench.quality.unseen import UQuery
from bench.quality.unseen_run import UOutcome
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.languages import Grammars, detect_language
from retrieval.search import pipeline

# ------------------------------------------------------------------ the committed split


def test_every_frozen_data_file_matches_the_manifest() -> None:
    assert frozen.mismatches() == []
    listed = frozen.manifest()
    split = json.loads((frozen.FROZEN_DIR / frozen.SPLIT).read_text())
    assert set(listed) == {frozen.SPLIT, *(r["archive"] for r in split["repositories"])}


def test_a_changed_or_unlisted_file_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "frozen"
    shutil.copytree(frozen.FROZEN_DIR, copy)
    split = json.loads((copy / frozen.SPLIT).read_text())
    split["questions"][0]["text"] += " (edited)"
    (copy / frozen.SPLIT).write_text(json.dumps(split))
    (copy / "extra.tar.xz").write_bytes(b"")
    problems = frozen.mismatches(copy)
    assert any(p.startswith(f"{frozen.SPLIT}: changed") for p in problems)
    assert "extra.tar.xz: not in MANIFEST.sha256" in problems
    with pytest.raises(frozen.FrozenSplitChanged):
        frozen.verify(copy)


def test_the_split_loads_with_every_answer_located(tmp_path: Path) -> None:
    loaded = frozen.load(tmp_path)
    assert loaded.notes["answers_not_parsed"] == []
    cells = Counter((q.repo, q.klass) for q in loaded.queries)
    for repo in ("python", "rust", "go"):
        slug = frozen.slug_of(f"small-files-{repo}")
        assert 100 <= cells[(slug, "semantic")] <= 150
        assert cells[(slug, "symbol")] == 50
    assert cells[(frozen.slug_of("history-anyio"), "localisation")] >= 80
    assert cells[(frozen.slug_of("history-structlog"), "localisation")] >= 80
    assert all(q.half == 0 for q in loaded.queries)  # no halves: all of it is the test set
    assert len({q.id for q in loaded.queries}) == len(loaded.queries)
    quick = frozen.load(tmp_path / "quick", quick=True).queries
    assert max(Counter((q.repo, q.klass) for q in quick).values()) == frozen.QUICK_PER_CELL


def _archive(name: str) -> dict[str, bytes]:
    with tarfile.open(frozen.FROZEN_DIR / name, "r:xz") as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_small_files_hold_one_function_and_no_comment() -> None:
    split = json.loads((frozen.FROZEN_DIR / frozen.SPLIT).read_text())
    parser, grammars = CodeParser(), Grammars()
    for record in split["repositories"]:
        if record["corpus"] != "small-files":
            continue
        files = _archive(record["archive"])
        code = {p: t.decode() for p, t in files.items() if detect_language(p) is not None}
        assert len(code) == frozen_build.FILES
        for path, text in code.items():
            parsed = parser.parse(path, text.encode())
            assert parsed is not None
            module = next(n.qualified_name for n in parsed.nodes if n.kind == "module")
            top = [n for n in parsed.nodes if n.kind == "function" and n.parent == module]
            assert len(top) == 1, path
            assert not any((n.docstring or "").strip() for n in parsed.nodes), path
            assert frozen_build.remove_comments(text, record["language"], grammars) == text, path
        for source in record["sources"]:  # each package's licence travels with its code
            assert any(p.startswith(f"LICENSES/{source['name']}/") for p in files), source


def test_history_snapshots_carry_their_licence() -> None:
    for name in ("history-anyio.tar.xz", "history-structlog.tar.xz"):
        files = _archive(name)
        assert "LICENSE" in files
        assert any(p.startswith("src/") for p in files)
        assert any(p.startswith("tests/") for p in files)


# ------------------------------------------------------------------ builder text operations


def test_remove_comments_keeps_code_and_strings() -> None:
    grammars = Grammars()
    rust = (
        "/// Returns the width.\n"
        "pub fn width(s: &str) -> usize {\n"
        '    let url = "http://x"; // the scheme\n'
        "    /* block\n       comment */\n"
        "    s.len()\n"
        "}\n"
    )
    assert frozen_build.remove_comments(rust, "rust", grammars) == (
        'pub fn width(s: &str) -> usize {\n    let url = "http://x";\n    s.len()\n}\n'
    )
    go = "package x\n\n// Add adds.\nfunc Add(a int) int {\n\treturn a // sum\n}\n"
    assert frozen_build.remove_comments(go, "go", grammars) == (
        "package x\n\nfunc Add(a int) int {\n\treturn a\n}\n"
    )
    python = 'def f(x):\n    # why\n    return "#not a comment"  # trailing\n'
    assert frozen_build.remove_comments(python, "python", grammars) == (
        'def f(x):\n    return "#not a comment"\n'
    )


def test_strip_all_removes_docstrings_then_comments() -> None:
    text = 'def f(x):\n    """Doubles x."""\n    # twice\n    return 2 * x\n'
    parsed = CodeParser().parse("m.py", text.encode())
    assert parsed is not None
    stripped = frozen_build.strip_all(text, "python", list(parsed.nodes), Grammars())
    assert stripped == "def f(x):\n    pass\n    return 2 * x\n"


def test_question_text_drops_a_leading_name() -> None:
    assert frozen_build.question_text("ToBool casts an interface to a bool type.", "ToBool") == (
        "Casts an interface to a bool type."
    )
    assert frozen_build.question_text("`chunk()` splits a list into parts", "chunk") == (
        "Splits a list into parts"
    )
    kept = "Returns the index of the first non ASCII byte."
    assert frozen_build.question_text(kept, "first_non_ascii_byte") == kept
    assert frozen_build.question_text("Max returns the max.", "Max") is None  # too short


def test_code_paths_leave_out_tests_and_examples() -> None:
    assert frozen_build.is_code_path("bytes/complete.rs")
    assert not frozen_build.is_code_path("tests/parse.rs")
    assert not frozen_build.is_code_path("funk_test.go")
    assert not frozen_build.is_code_path("examples/demo.py")


def test_quick_subset_is_fixed_and_capped() -> None:
    questions = [
        {"id": f"r-{k}-{i:04d}", "repo": "r", "class": k} for k in ("a", "b") for i in range(9)
    ]
    first = frozen.quick_subset(questions, 4)
    again = frozen.quick_subset(list(reversed(questions)), 4)
    assert {q["id"] for q in first} == {q["id"] for q in again}  # not the input order
    assert Counter(q["class"] for q in first) == {"a": 4, "b": 4}


# ------------------------------------------------------------------------------ report


def _outcome(i: int, klass: str, repo: str, **ranks: int | None) -> UOutcome:
    corpus = "history" if klass == "localisation" else "small-files"
    slug = frozen.slug_of(f"{corpus}-{repo}")
    answer = Answer(slug, "a.py", "a.f", 1, 2)
    query = UQuery(f"q{i}", corpus, klass, "python", "text", (answer,), 0)  # type: ignore[arg-type]
    return UOutcome(query, dict(ranks))


def test_verdicts_count_within_the_top_ten() -> None:
    assert frozen_report.verdict(3, 1) == "worse"
    assert frozen_report.verdict(None, 40) == "same"  # both outside the top 10
    assert frozen_report.verdict(10, None) == "better"
    members = [
        _outcome(0, "semantic", "python", fused=1, dense=2),
        _outcome(1, "semantic", "python", fused=5, dense=1),
        _outcome(2, "semantic", "python", fused=None, dense=None),
    ]
    assert frozen_report.versus(members, "fused", "dense") == {"worse": 1, "better": 1, "same": 1}


def test_headline_targets_and_ablations() -> None:
    configs = ("fused", "fused-pin", "dense", "bm25", "dense+bm25")
    outcomes = [
        _outcome(0, "semantic", "python", fused=1, dense=1, bm25=2, **{"fused-pin": 2}),
        _outcome(1, "semantic", "python", fused=1, dense=2, bm25=None, **{"fused-pin": 1}),
        _outcome(2, "localisation", "anyio", fused=2, dense=1, bm25=4, **{"fused-pin": 2}),
        _outcome(3, "symbol", "python", fused=1, dense=3, bm25=1, **{"fused-pin": 4}),
    ]
    rows = {(r["class"], r["repository"]): r for r in frozen_report.headline(outcomes, configs)}
    semantic = rows[("semantic", "python")]
    assert semantic["fused_minus_dense"] == pytest.approx(0.25)  # 1.0 against 0.75
    assert semantic["target"]["met"]  # 1.0 >= 0.75 + 0.05
    localisation = rows[("localisation", "anyio")]
    assert localisation["fused_minus_best_of_dense_bm25"] == pytest.approx(-0.5)
    assert not localisation["target"]["met"]
    assert rows[("symbol", "python")]["target"] == {
        "metric": "R@1",
        "value": 1.0,
        "bar": frozen_report.SYMBOL_R1,
        "met": True,
    }
    pin = [a for a in frozen_report.ablations(outcomes, configs) if a["repository"] == "all"]
    symbol = next(a for a in pin if a["class"] == "symbol")
    assert symbol["stage"] == "pin" and symbol["delta"] == pytest.approx(-0.75)
    text = frozen_report.render(outcomes, configs)
    assert "| pin |" in text and "-0.750" in text
    assert "None run" in frozen_report.render(outcomes, ("fused", "dense", "bm25", "dense+bm25"))


# ------------------------------------------------------------------------------ refusal


def test_tuning_tools_refuse_the_frozen_split(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="is a test set"):
        frozen.refuse_frozen_repos(["local/unseen/x", frozen.slug_of("history-anyio")], "sweep")
    frozen.refuse_frozen_repos(["local/unseen/x", "local/quality/y"], "sweep")  # no refusal
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"split": "frozen"}))
    (run / "queries.json").write_text(json.dumps({"queries": []}))
    with pytest.raises(SystemExit, match=r"bench\.quality\.compare"):
        compare.load(run)
    other = tmp_path / "other"
    other.mkdir()
    answers = [{"repo": frozen.slug_of("small-files-go"), "path": "a.go", "qualified_name": "f"}]
    (other / "queries.json").write_text(json.dumps({"queries": [{"id": "q", "answers": answers}]}))
    assert frozen.is_frozen_run(other)


def test_sweep_refuses_to_collect_the_frozen_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "lists.pkl"
    argv = ["fusion_sweep", "collect", "--set", "frozen", "--out", str(out)]
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit, match="is a test set"):
        fusion_sweep.main()
    assert not out.exists()


def test_every_skippable_stage_gets_an_ablation() -> None:
    stages, why = frozen_run.ablation_stages()
    assert why == ""
    assert set(stages) == set(pipeline.SKIPPABLE)
    assert list(stages) == [s for s in pipeline.STAGE_NAMES if s in pipeline.SKIPPABLE]
    configs = frozen_run.configs(stages)
    assert configs[0] == "fused" and "fusion" not in frozen_report.stages_of(configs)
    assert {f"fused-{s}" for s in stages} <= set(configs)


def test_a_finished_run_redraws_the_same_tables() -> None:
    configs = ("fused", "fused-pin", "dense", "bm25", "dense+bm25")
    outcomes = [
        _outcome(0, "semantic", "python", fused=1, dense=2, bm25=3, **{"fused-pin": 1}),
        _outcome(1, "localisation", "anyio", fused=None, dense=4, bm25=1, **{"fused-pin": 2}),
    ]
    records = json.loads(json.dumps(frozen_report.per_question(outcomes)))
    again = frozen_report.outcomes_from_json(records)
    assert frozen_report.render(again, configs) == frozen_report.render(outcomes, configs)
    assert [o.query.repo for o in again] == [o.query.repo for o in outcomes]
    data = frozen_report.payload(outcomes, configs, {})
    assert data["fused_vs_dense"]["q1"] == {"fused": None, "dense": 4, "verdict": "worse"}

"""Tables for the unseen corpora: per corpus, class and language, the service's
configurations beside the external baselines, the gap to dense, where fused loses, and
what crowds the fused top 10. Pure (no I/O), so the arithmetic is unit-tested.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from bench.quality.datasets import Answer
from bench.quality.metrics import Scores, reciprocal_rank, score
from bench.quality.report import held_out_rule
from bench.quality.unseen import UQuery
from bench.quality.unseen_run import BASELINES, CONFIGS, TOP_K, UOutcome

ALL = "all"
SHOWN: tuple[str, ...] = ("fused", "vector", "lexical", "symbol", *BASELINES)  # column order
Key = tuple[str, str, str]  # (corpus, class, language or ALL)


def groups(outcomes: Sequence[UOutcome]) -> dict[Key, list[UOutcome]]:
    """Outcomes per (corpus, class, language), and per (corpus, class) over languages."""
    out: dict[Key, list[UOutcome]] = {}
    for o in outcomes:
        q = o.query
        out.setdefault((q.corpus, q.klass, q.language), []).append(o)
        out.setdefault((q.corpus, q.klass, ALL), []).append(o)
    return dict(sorted(out.items()))


def scores(members: Sequence[UOutcome], configs: Sequence[str] = CONFIGS) -> dict[str, Scores]:
    return {c: score(o.ranks.get(c) for o in members) for c in configs}


def paired(members: Sequence[UOutcome], a: str, b: str) -> tuple[float, float]:
    """Mean per-query difference of reciprocal ranks (a minus b) and its standard error."""
    diffs = [reciprocal_rank(o.ranks.get(a)) - reciprocal_rank(o.ranks.get(b)) for o in members]
    if not diffs:
        return 0.0, 0.0
    stderr = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return statistics.fmean(diffs), stderr


def losses(outcomes: Sequence[UOutcome]) -> list[dict[str, Any]]:
    """Every (corpus, class, language) cell where fused MRR@10 is below dense, BM25, their
    RRF or a single service stream; `significant` when the paired difference is more than
    two standard errors below zero."""
    out = []
    for key, members in groups(outcomes).items():
        table = scores(members)
        fused = table["fused"].mrr10
        for other in ("dense", "bm25", "dense+bm25", "vector", "lexical", "symbol"):
            if table[other].mrr10 > fused:
                mean, stderr = paired(members, "fused", other)
                out.append(
                    {
                        "corpus": key[0],
                        "class": key[1],
                        "language": key[2],
                        "n": len(members),
                        "fused": fused,
                        "other": other,
                        "other_mrr10": table[other].mrr10,
                        "delta": mean,
                        "stderr": stderr,
                        "significant": mean < -2 * stderr,
                    }
                )
    return out


def crowding(members: Sequence[UOutcome]) -> dict[str, float]:
    n = len(members) or 1
    rows = sum(o.fused_rows for o in members) or 1
    return {
        "queries_with_nested_results": sum(o.nested_pairs > 0 for o in members) / n,
        "container_above_answer": sum(o.container_above for o in members) / n,
        "test_rows_share": sum(o.test_rows for o in members) / rows,
    }


def halves(members: Sequence[UOutcome], config: str) -> tuple[Scores, Scores]:
    return (
        score(o.ranks.get(config) for o in members if o.query.half == 0),
        score(o.ranks.get(config) for o in members if o.query.half == 1),
    )


PROSE: tuple[str, ...] = ("semantic", "localisation")


def held_out_check(
    outcomes: Sequence[UOutcome],
    candidate: str,
    baseline: str = "fused",
    classes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Would `candidate` replace `baseline`? report.held_out_rule over the corpora's
    held-out halves: the mean gain over (corpus, class) cells, and the worst cell; only
    the cells of `classes` when given."""
    tune: dict[str, float] = {}
    best: dict[str, float] = {}
    default: dict[str, float] = {}
    for (corpus, klass, language), members in groups(outcomes).items():
        if language != ALL or (classes is not None and klass not in classes):
            continue
        name = f"{corpus}/{klass}"
        tune[name] = halves(members, candidate)[0].mrr10 - halves(members, baseline)[0].mrr10
        best[name] = halves(members, candidate)[1].mrr10
        default[name] = halves(members, baseline)[1].mrr10
    if not best:
        return {"change": False}
    gain, worst, carries = held_out_rule(
        statistics.fmean(best.values()), statistics.fmean(default.values()), best, default
    )
    return {
        "candidate": candidate,
        "baseline": baseline,
        "classes": list(classes) if classes is not None else "all",
        "tuning_gain": statistics.fmean(tune.values()),
        "held_out_gain": gain,
        "worst_cell": {"cell": worst[1], "delta": worst[0]},
        "carries_over": carries and statistics.fmean(tune.values()) > 0,
    }


def _f(x: float) -> str:
    return f"{x:.3f}"


def _signed(x: float) -> str:
    return f"{x:+.3f}"


def render(outcomes: Sequence[UOutcome], notes: Sequence[str] = ()) -> str:
    grouped = groups(outcomes)
    lines = [
        "### MRR@10 per corpus, class and language (scoped to the answer's repository)",
        "",
        "| corpus | class | language | n | fused | vector | lexical | symbol | dense | bm25 "
        "| dense+bm25 | dense+doc | fused - dense | fused - dense+doc | fused - best baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (corpus, klass, language), members in grouped.items():
        t = scores(members)
        best = max(t[c].mrr10 for c in BASELINES)
        label = f"**{language}**" if language == ALL else language
        lines.append(
            f"| {corpus} | {klass} | {label} | {len(members)} | "
            + " | ".join(_f(t[c].mrr10) for c in SHOWN)
            + f" | {_signed(t['fused'].mrr10 - t['dense'].mrr10)}"
            + f" | {_signed(t['fused'].mrr10 - t['dense+doc'].mrr10)}"
            + f" | {_signed(t['fused'].mrr10 - best)} |"
        )
    lines += [
        "",
        "### Recall@10 (R@1 for symbol) per corpus, class and language",
        "",
        "| corpus | class | language | n | metric | fused | vector | lexical | symbol | dense "
        "| bm25 | dense+bm25 | dense+doc |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (corpus, klass, language), members in grouped.items():
        t = scores(members)
        metric = "R@1" if klass == "symbol" else "R@10"
        values = [t[c].recall1 if klass == "symbol" else t[c].recall10 for c in SHOWN]
        label = f"**{language}**" if language == ALL else language
        lines.append(
            f"| {corpus} | {klass} | {label} | {len(members)} | {metric} | "
            + " | ".join(_f(v) for v in values)
            + " |"
        )
    lines += [
        "",
        "### Tuning half / held-out half (MRR@10, all languages)",
        "",
        "| corpus | class | fused | dense | bm25 | dense+bm25 | dense+doc |",
        "|---|---|---|---|---|---|---|",
    ]
    for (corpus, klass, language), members in grouped.items():
        if language != ALL:
            continue
        cells = []
        for config in ("fused", *BASELINES):
            tune, held = halves(members, config)
            cells.append(f"{_f(tune.mrr10)} / {_f(held.mrr10)}")
        lines.append(f"| {corpus} | {klass} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### What crowds the fused top 10",
        "",
        "| corpus | class | queries with a result inside another | a container of the "
        "answer ranked above it | test-code rows |",
        "|---|---|---|---|---|",
    ]
    for (corpus, klass, language), members in grouped.items():
        if language != ALL:
            continue
        c = crowding(members)
        lines.append(
            f"| {corpus} | {klass} | {c['queries_with_nested_results']:.1%} | "
            f"{c['container_above_answer']:.1%} | {c['test_rows_share']:.1%} |"
        )
    lines += [
        "",
        "### Held-out rule (report.held_out_rule): would a baseline replace fused?",
        "",
        "| candidate | classes | tuning-half gain | held-out gain | worst held-out cell "
        "| carries over |",
        "|---|---|---|---|---|---|",
    ]
    for classes in (None, PROSE):
        for config in BASELINES:
            check = held_out_check(outcomes, config, classes=classes)
            if "held_out_gain" not in check:
                continue
            worst = check["worst_cell"]
            lines.append(
                f"| {config} | {'all' if classes is None else ', '.join(classes)} | "
                f"{_signed(check['tuning_gain'])} | {_signed(check['held_out_gain'])} | "
                f"{worst['cell']} {_signed(worst['delta'])} | "
                f"{'yes' if check['carries_over'] else 'no'} |"
            )
    lost = [x for x in losses(outcomes) if x["other"] in BASELINES or x["significant"]]
    lines += [
        "",
        "### Where fused loses (MRR@10 below a baseline, or significantly below a stream)",
        "",
        "| corpus | class | language | n | fused | against | its MRR@10 | paired delta (2 s.e.) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in lost:
        mark = " *" if x["significant"] else ""
        lines.append(
            f"| {x['corpus']} | {x['class']} | {x['language']} | {x['n']} | {_f(x['fused'])} | "
            f"{x['other']} | {_f(x['other_mrr10'])} | {_signed(x['delta'])} "
            f"({2 * x['stderr']:.3f}){mark} |"
        )
    lines += ["", "(* more than two standard errors below zero)", ""]
    if notes:
        lines += ["Notes:", *(f"- {n}" for n in notes), ""]
    return "\n".join(lines)


def payload(outcomes: Sequence[UOutcome], extra: dict[str, Any]) -> dict[str, Any]:
    grouped = groups(outcomes)
    return {
        "metrics": {
            "/".join(key): {c: s.as_dict() for c, s in scores(members).items()}
            for key, members in grouped.items()
        },
        "halves": {
            "/".join(key): {
                c: {"tuning": h[0].as_dict(), "held_out": h[1].as_dict()}
                for c in CONFIGS
                for h in [halves(members, c)]
            }
            for key, members in grouped.items()
            if key[2] == ALL
        },
        "crowding": {
            "/".join(key): crowding(members) for key, members in grouped.items() if key[2] == ALL
        },
        "losses": losses(outcomes),
        "held_out_checks": [
            held_out_check(outcomes, c, classes=classes)
            for classes in (None, PROSE)
            for c in BASELINES
        ],
        **extra,
    }


def per_query(outcomes: Sequence[UOutcome]) -> list[dict[str, Any]]:
    return [
        {
            **o.query.as_dict(),
            "ranks": dict(o.ranks),
            "nested_pairs": o.nested_pairs,
            "container_above": o.container_above,
            "test_rows": o.test_rows,
            "fused_rows": o.fused_rows,
        }
        for o in outcomes
    ]


def outcomes_from_json(records: Sequence[dict[str, Any]]) -> list[UOutcome]:
    """Outcomes back from a run's queries.json (no query text is kept there), to redraw
    the tables of a finished run."""
    out = []
    for r in records:
        answers = tuple(
            Answer(a["repo"], a["path"], a["qualified_name"], 0, 0) for a in r["answers"]
        )
        query = UQuery(r["id"], r["corpus"], r["class"], r["language"], "", answers, r["half"])
        outcome = UOutcome(query, dict(r["ranks"]), r["nested_pairs"], r["container_above"])
        outcome.test_rows = r["test_rows"]
        outcome.fused_rows = r.get("fused_rows", TOP_K)
        out.append(outcome)
    return out

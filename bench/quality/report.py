"""Aggregates outcomes into tables, and writes them: markdown, JSON and a PNG plot.

Everything but `write_plot` is pure, so the arithmetic is unit-tested without a stack.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.quality.datasets import QUERY_CLASSES
from bench.quality.metrics import CUTOFF, Scores, approx_tokens, reciprocal_rank, score
from bench.quality.runner import (
    CONFIGS,
    DEFAULT_CAP,
    DEFAULT_K,
    FUSED,
    GRAPH,
    SINGLE_STREAMS,
    Outcome,
)
from bench.quality.unseen_run import BASELINES
from cograph_api.limits import SNIPPET_CHARS_DEFAULT

OVERALL = "overall"
GROUPS: tuple[str, ...] = (*QUERY_CLASSES, OVERALL)
Table = dict[str, dict[str, Scores]]  # config -> class (or overall) -> scores
# A held-out gain smaller than this is noise at a few hundred queries per half.
MIN_GAIN = 0.005


def _group(outcomes: Iterable[Outcome], group: str) -> list[Outcome]:
    return [o for o in outcomes if group in (OVERALL, o.query.klass)]


def present_baselines(outcomes: Iterable[Outcome]) -> list[str]:
    """The external baselines some outcome was ranked by (none when a run skipped them)."""
    seen = {config for o in outcomes for config in o.ranks}
    return [config for config in BASELINES if config in seen]


def table(outcomes: Sequence[Outcome], configs: Sequence[str] | None = None) -> Table:
    """Scores per configuration and query class; classes with no queries are left out.
    By default the service's configurations, then the external baselines the outcomes
    carry."""
    out: Table = {}
    for config in configs if configs is not None else (*CONFIGS, *present_baselines(outcomes)):
        out[config] = {}
        for group in GROUPS:
            members = _group(outcomes, group)
            if members:
                out[config][group] = score(o.ranks.get(config) for o in members)
    return out


def paired(outcomes: Sequence[Outcome], a: str, b: str) -> tuple[float, float]:
    """Mean per-query difference of reciprocal ranks at 10 (a minus b) and its standard
    error (0 with fewer than two queries)."""
    diffs = [reciprocal_rank(o.ranks.get(a)) - reciprocal_rank(o.ranks.get(b)) for o in outcomes]
    if not diffs:
        return 0.0, 0.0
    stderr = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return statistics.fmean(diffs), stderr


def fusion_regressions(tbl: Table, outcomes: Sequence[Outcome] | None = None) -> list[str]:
    """Classes (and overall) where fused MRR@10 is below the best single stream's.

    With the per-query outcomes the comparison is paired: fused is below only when the mean
    per-query difference of reciprocal ranks is negative by more than two standard errors.
    Run to run, ties broken on row ids (which follow insertion order) move a class's MRR by
    about 0.03 on ~70 queries; a bare `<` on the means would flag that noise as a regression.
    """
    problems = []
    for group, fused in tbl.get(FUSED, {}).items():
        best_name, best = max(
            ((name, tbl[name][group].mrr10) for name in SINGLE_STREAMS if group in tbl[name]),
            key=lambda item: item[1],
        )
        if fused.mrr10 >= best:
            continue
        if outcomes is not None:
            mean, stderr = paired(_group(outcomes, group), FUSED, best_name)
            if mean >= -2 * stderr:
                continue
        problems.append(f"{group}: fused MRR@10 {fused.mrr10:.3f} < {best_name} {best:.3f}")
    return problems


@dataclass(frozen=True)
class TokenUse:
    results: int
    answers_found: int  # fused, in the top 10
    tokens_per_result: float
    tokens_per_answer: float | None
    whole_file_tokens_per_result: float
    whole_file_tokens_per_answer: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def token_use(outcomes: Sequence[Outcome]) -> dict[str, TokenUse]:
    """Tokens returned at the default settings (fused, top_k 10, default snippets) vs the
    distinct whole files of the same results; tokens ~ characters / 4."""
    out: dict[str, TokenUse] = {}
    for group in GROUPS:
        members = _group(outcomes, group)
        if not members:
            continue
        results = sum(len(o.result_chars) for o in members)
        found = sum(1 for o in members if (o.ranks.get(FUSED) or CUTOFF + 1) <= CUTOFF)
        snippet = approx_tokens(sum(sum(o.result_chars) for o in members))
        whole = approx_tokens(sum(o.whole_file_chars for o in members))
        out[group] = TokenUse(
            results,
            found,
            snippet / results if results else 0.0,
            snippet / found if found else None,
            whole / results if results else 0.0,
            whole / found if found else None,
        )
    return out


@dataclass(frozen=True)
class SweepPoint:
    k: int
    cap: int
    tune: Scores  # overall, half 0
    held_out: Scores  # overall, half 1
    held_out_by_class: dict[str, float]  # MRR@10 per class, half 1


def _halves(
    outcomes: Sequence[Outcome], rank_of: Callable[[Outcome], int | None]
) -> tuple[Scores, Scores, dict[str, float]]:
    """Scores on the tuning half, on the held-out half, and held-out MRR@10 per class."""
    tune = [o for o in outcomes if o.query.half == 0]
    held = [o for o in outcomes if o.query.half == 1]
    by_class: dict[str, float] = {
        klass: score(rank_of(o) for o in held if o.query.klass == klass).mrr10
        for klass in QUERY_CLASSES
        if any(o.query.klass == klass for o in held)
    }
    return score(rank_of(o) for o in tune), score(rank_of(o) for o in held), by_class


def held_out_rule(
    best: float,
    default: float,
    best_by_class: Mapping[str, float],
    default_by_class: Mapping[str, float],
) -> tuple[float, tuple[float, str], bool]:
    """The rule every tuning choice follows: the held-out gain over the default, the worst
    class change, and whether the candidate carries over (gains at least MIN_GAIN and no
    class loses more than that)."""
    gain = best - default
    worst = min(
        ((best_by_class[c] - default_by_class.get(c, 0.0), c) for c in best_by_class),
        default=(0.0, ""),
    )
    return gain, worst, gain >= MIN_GAIN and worst[0] > -MIN_GAIN


def _sweep_rank(point: tuple[int, int]) -> Callable[[Outcome], int | None]:
    def rank(outcome: Outcome) -> int | None:
        return outcome.sweep[point]

    return rank


def _weight_rank(point: tuple[float, float]) -> Callable[[Outcome], int | None]:
    def rank(outcome: Outcome) -> int | None:
        return outcome.weight_sweep[point]

    return rank


def sweep_points(outcomes: Sequence[Outcome]) -> list[SweepPoint]:
    if not outcomes:
        return []
    return [
        SweepPoint(k, cap, *_halves(outcomes, _sweep_rank((k, cap))))
        for k, cap in sorted(outcomes[0].sweep)
    ]


@dataclass(frozen=True)
class WeightScores:
    summary: float  # the ast_summary layer's weight
    doc: float  # the repo_doc layer's weight
    tune: Scores
    held_out: Scores
    held_out_by_class: dict[str, float]


def weight_points(outcomes: Sequence[Outcome]) -> list[WeightScores]:
    """MRR per layer-weight pair on each half (the same split as the k/cap sweep)."""
    if not outcomes or not outcomes[0].weight_sweep:
        return []
    return [
        WeightScores(s, d, *_halves(outcomes, _weight_rank((s, d))))
        for s, d in sorted(outcomes[0].weight_sweep)
    ]


def recommend_weights(points: Sequence[WeightScores]) -> dict[str, Any]:
    """The best pair on the tuning half, recommended only if the held-out half gains over
    equal weights by MIN_GAIN and no class there loses more than that."""
    default = next((p for p in points if (p.summary, p.doc) == (1.0, 1.0)), None)
    if default is None:
        return {"change": False, "reason": "equal weights are not in the grid"}
    best = max(points, key=lambda p: (p.tune.mrr10, -abs(p.summary - 1) - abs(p.doc - 1)))
    gain, worst, carries = held_out_rule(
        best.held_out.mrr10,
        default.held_out.mrr10,
        best.held_out_by_class,
        default.held_out_by_class,
    )
    change = (best.summary, best.doc) != (1.0, 1.0) and carries
    return {
        "change": change,
        "best_on_tuning_half": {"ast_summary": best.summary, "repo_doc": best.doc},
        "tuning_mrr10": {"best": best.tune.mrr10, "equal": default.tune.mrr10},
        "held_out_mrr10": {"best": best.held_out.mrr10, "equal": default.held_out.mrr10},
        "held_out_gain": gain,
        "worst_class_change": {"class": worst[1], "delta": worst[0]},
        "reason": "held-out half gains" if change else "keep equal weights",
    }


def render_weights(points: Sequence[WeightScores], advice: dict[str, Any]) -> str:
    if not points:
        return ""
    classes = [c for c in QUERY_CLASSES if c in points[0].held_out_by_class]
    lines = [
        "### Layer weights (RETRIEVAL_LAYER_WEIGHTS, replayed at the default k and cap)",
        "",
        "| ast_summary | repo_doc | tuning half | held-out half | "
        + " | ".join(f"held-out {c}" for c in classes)
        + " |",
        "|---|---|---|---|" + "---|" * len(classes),
    ]
    for p in points:
        mark = " (default)" if (p.summary, p.doc) == (1.0, 1.0) else ""
        lines.append(
            f"| {p.summary:g}{mark} | {p.doc:g} | {p.tune.mrr10:.3f} | {p.held_out.mrr10:.3f} | "
            + " | ".join(f"{p.held_out_by_class[c]:.3f}" for c in classes)
            + " |"
        )
    lines += ["", f"Recommendation: {json.dumps(advice)}", ""]
    return "\n".join(lines)


def recommend(points: Sequence[SweepPoint]) -> dict[str, Any]:
    """Pick the best point on the tuning half; recommend it only if the held-out half
    gains over the current defaults by at least MIN_GAIN MRR@10 (and loses no class by
    more than that)."""
    if not points:
        return {"change": False, "reason": "no sweep"}
    default = next((p for p in points if (p.k, p.cap) == (DEFAULT_K, DEFAULT_CAP)), None)
    best = max(points, key=lambda p: (p.tune.mrr10, -abs(p.k - DEFAULT_K), p.cap))
    if default is None:
        return {"change": False, "reason": "the defaults are not in the grid"}
    gain, worst_class, carries = held_out_rule(
        best.held_out.mrr10,
        default.held_out.mrr10,
        best.held_out_by_class,
        default.held_out_by_class,
    )
    change = (best.k, best.cap) != (DEFAULT_K, DEFAULT_CAP) and carries
    return {
        "change": change,
        "best_on_tuning_half": {"rrf_k": best.k, "candidate_cap": best.cap},
        "tuning_mrr10": {"best": best.tune.mrr10, "default": default.tune.mrr10},
        "held_out_mrr10": {"best": best.held_out.mrr10, "default": default.held_out.mrr10},
        "held_out_gain": gain,
        "worst_class_change": {"class": worst_class[1], "delta": worst_class[0]},
        "reason": (
            "held-out half gains"
            if change
            else "the held-out half does not gain enough: keep the current defaults"
        ),
    }


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(
    tbl: Table,
    *,
    tokens: dict[str, TokenUse],
    points: Sequence[SweepPoint],
    advice: dict[str, Any],
    graph_hits: dict[str, float],
    notes: Sequence[str],
) -> str:
    """The report as markdown (the same text is printed and pasted into bench/RESULTS.md or
    bench/notes/)."""
    lines = ["### Retrieval quality (MRR@10 / R@1 / R@5 / R@10 / nDCG@10)", ""]
    for group in GROUPS:
        if group not in tbl.get(FUSED, {}):
            continue
        count = tbl[FUSED][group].count
        lines += [f"**{group}** ({count} queries)", ""]
        lines += ["| config | MRR@10 | R@1 | R@5 | R@10 | nDCG@10 |", "|---|---|---|---|---|---|"]
        for config, groups in tbl.items():
            s = groups.get(group)
            if s is None:
                continue
            label = config
            if config == GRAPH:
                label = f"{GRAPH} (hit in results or graph: {graph_hits.get(group, 0.0):.3f})"
            lines.append(
                f"| {label} | {s.mrr10:.3f} | {s.recall1:.3f} | {s.recall5:.3f} | "
                f"{s.recall10:.3f} | {s.ndcg10:.3f} |"
            )
        lines.append("")
    lines += [
        "### Token efficiency (fused, top_k 10, default snippets, "
        f"{SNIPPET_CHARS_DEFAULT} chars unless RETRIEVAL_SNIPPET_CHARS is set; "
        "tokens ~ chars / 4)",
        "",
        "| class | results | answers found | tokens/result | tokens/answer | "
        "whole files: tokens/result | whole files: tokens/answer |",
        "|---|---|---|---|---|---|---|",
    ]
    for group, use in tokens.items():
        lines.append(
            f"| {group} | {use.results} | {use.answers_found} | {use.tokens_per_result:.0f} | "
            f"{_fmt(use.tokens_per_answer, 0)} | {use.whole_file_tokens_per_result:.0f} | "
            f"{_fmt(use.whole_file_tokens_per_answer, 0)} |"
        )
    lines += ["", "### Tuning sweep (fusion replayed offline; MRR@10 overall)", ""]
    classes = [c for c in QUERY_CLASSES if points and c in points[0].held_out_by_class]
    lines.append(
        "| rrf_k | cap | tuning half | held-out half | "
        + " | ".join(f"held-out {c}" for c in classes)
        + " |"
    )
    lines.append("|---|---|---|---|" + "---|" * len(classes))
    for p in points:
        mark = " (default)" if (p.k, p.cap) == (DEFAULT_K, DEFAULT_CAP) else ""
        lines.append(
            f"| {p.k}{mark} | {p.cap} | {p.tune.mrr10:.3f} | {p.held_out.mrr10:.3f} | "
            + " | ".join(f"{p.held_out_by_class[c]:.3f}" for c in classes)
            + " |"
        )
    lines += ["", f"Recommendation: {json.dumps(advice)}", ""]
    if notes:
        lines += ["Notes:", *(f"- {note}" for note in notes), ""]
    return "\n".join(lines)


def variant_table(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """MRR@10 per (class, variant, language) for the single streams and fusion: where a
    class's average hides a weak case (bare vs qualified names, one perturbation)."""
    keys = sorted(
        {(o.query.klass, o.query.variant.split("+")[0], o.query.language) for o in outcomes}
    )
    rows = []
    for klass, variant, language in keys:
        members = [
            o
            for o in outcomes
            if (o.query.klass, o.query.variant.split("+")[0], o.query.language)
            == (klass, variant, language)
        ]
        row: dict[str, Any] = {
            "class": klass,
            "variant": variant,
            "language": language,
            "count": len(members),
        }
        for config in (*SINGLE_STREAMS, FUSED):
            row[config] = score(o.ranks.get(config) for o in members).mrr10
        rows.append(row)
    return rows


def render_variants(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "### MRR@10 by variant (signature variants by their first perturbation)",
        "",
        "| class | variant | language | n | vector | lexical | symbol | fused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['class']} | {r['variant']} | {r['language']} | {r['count']} | "
            + " | ".join(f"{r[c]:.3f}" for c in (*SINGLE_STREAMS, FUSED))
            + " |"
        )
    return "\n".join([*lines, ""])


ALL_LANGUAGES = "all"
BASELINE_COLUMNS: tuple[str, ...] = (FUSED, "dense", "dense+doc", "dense+bm25", "bm25")
HALVES: dict[int | None, str] = {None: "both", 0: "tuning", 1: "held-out"}


def baseline_rows(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """MRR@10 of fused and the external baselines per class and language (and over the
    languages where a class has several), with fused - dense and the standard error of
    that paired difference; the semantic class also per half. Empty when the run has no
    baselines."""
    if not present_baselines(outcomes):
        return []
    rows: list[dict[str, Any]] = []
    for klass in QUERY_CLASSES:
        members = [o for o in outcomes if o.query.klass == klass]
        languages = sorted({o.query.language for o in members})
        if len(languages) > 1:
            languages.append(ALL_LANGUAGES)
        halves: tuple[int | None, ...] = (None, 0, 1) if klass == "semantic" else (None,)
        for half in halves:
            for language in languages:
                group = [
                    o
                    for o in members
                    if language in (ALL_LANGUAGES, o.query.language)
                    and half in (None, o.query.half)
                ]
                if not group:
                    continue
                delta, stderr = paired(group, FUSED, "dense")
                rows.append(
                    {
                        "class": klass,
                        "language": language,
                        "half": HALVES[half],
                        "count": len(group),
                        "mrr10": {
                            c: score(o.ranks.get(c) for o in group).mrr10 for c in BASELINE_COLUMNS
                        },
                        "fused_minus_dense": delta,
                        "fused_minus_dense_stderr": stderr,
                    }
                )
    return rows


def fused_minus_dense_line(rows: Sequence[dict[str, Any]], klass: str = "semantic") -> str:
    """One line: fused - dense MRR@10 on a class over its languages, both halves and each."""
    mine = [r for r in rows if r["class"] == klass]
    if any(r["language"] == ALL_LANGUAGES for r in mine):  # else the class has one language
        mine = [r for r in mine if r["language"] == ALL_LANGUAGES]
    by_half = {r["half"]: r for r in mine}
    both = by_half.get("both")
    if both is None:
        return ""
    text = (
        f"fused - dense ({klass}, MRR@10, {both['count']} queries): "
        f"{both['fused_minus_dense']:+.3f} (2 s.e. {2 * both['fused_minus_dense_stderr']:.3f})"
    )
    halves = [
        f"{name} half {by_half[name]['fused_minus_dense']:+.3f}"
        for name in ("tuning", "held-out")
        if name in by_half
    ]
    return text + ("; " + ", ".join(halves) if halves else "")


def render_baselines(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    lines = [
        "### Against external baselines (MRR@10; computed outside the service)",
        "",
        "Code queries: every definition of every code repository; docs queries: every "
        "markdown chunk. dense: the embedder's model over each candidate's own lines, exact "
        "cosine; dense+doc: with the doc comment that lies outside a definition; bm25: "
        "identifier-split tokens; dense+bm25: RRF (k 60) of the two.",
        "",
        "| class | language | half | n | "
        + " | ".join(BASELINE_COLUMNS)
        + " | fused - dense (2 s.e.) |",
        "|---|---|---|---|" + "---|" * len(BASELINE_COLUMNS) + "---|",
    ]
    for r in rows:
        language = f"**{r['language']}**" if r["language"] == ALL_LANGUAGES else r["language"]
        lines.append(
            f"| {r['class']} | {language} | {r['half']} | {r['count']} | "
            + " | ".join(f"{r['mrr10'][c]:.3f}" for c in BASELINE_COLUMNS)
            + f" | {r['fused_minus_dense']:+.3f} ({2 * r['fused_minus_dense_stderr']:.3f}) |"
        )
    line = fused_minus_dense_line(rows)
    lines += ["", *([line, ""] if line else [])]
    return "\n".join(lines)


def graph_hit_rates(outcomes: Sequence[Outcome]) -> dict[str, float]:
    out = {}
    for group in GROUPS:
        members = _group(outcomes, group)
        if members:
            out[group] = sum(o.graph_hit for o in members) / len(members)
    return out


def payload(
    tbl: Table,
    *,
    tokens: dict[str, TokenUse],
    points: Sequence[SweepPoint],
    advice: dict[str, Any],
    graph_hits: dict[str, float],
    extra: dict[str, Any],
    outcomes: Sequence[Outcome] | None = None,
) -> dict[str, Any]:
    return {
        "metrics": {c: {g: s.as_dict() for g, s in groups.items()} for c, groups in tbl.items()},
        "graph_hit_rate": graph_hits,
        "tokens": {g: use.as_dict() for g, use in tokens.items()},
        "sweep": [
            {
                "rrf_k": p.k,
                "candidate_cap": p.cap,
                "tuning": p.tune.as_dict(),
                "held_out": p.held_out.as_dict(),
                "held_out_mrr10_by_class": p.held_out_by_class,
            }
            for p in points
        ],
        "recommendation": advice,
        "fusion_regressions": fusion_regressions(tbl, outcomes),
        **extra,
    }


def table_from_json(data: dict[str, Any]) -> Table:
    """The table back from a results.json `metrics` section (to re-plot a finished run)."""
    return {
        config: {
            group: Scores(
                int(v["count"]),
                v["mrr@10"],
                v["recall@1"],
                v["recall@5"],
                v["recall@10"],
                v["ndcg@10"],
            )
            for group, v in groups.items()
        }
        for config, groups in data["metrics"].items()
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_plot(
    path: Path,
    tbl: Table,
    graph_hits: dict[str, float] | None = None,
    configs: Sequence[str] = CONFIGS,
) -> None:
    """Grouped bars: MRR@10 and Recall@10 per query class, one bar per configuration.

    In the Recall@10 panel the fused+graph bar is the share of answers found among the
    results or the graph nodes (graph nodes have no rank, so no other metric moves).
    """
    import matplotlib

    matplotlib.use("Agg")  # no display here; must be chosen before pyplot is imported
    import matplotlib.pyplot as plt

    groups = [g for g in GROUPS if g in tbl.get(FUSED, {})]
    shown = [c for c in configs if c in tbl]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    width = 0.8 / max(1, len(shown))
    for ax, metric, title in (
        (axes[0], "mrr10", "MRR@10"),
        (axes[1], "recall10", "Recall@10"),
    ):
        for i, config in enumerate(shown):
            values = [getattr(tbl[config][g], metric) if g in tbl[config] else 0.0 for g in groups]
            if config == GRAPH and metric == "recall10" and graph_hits:
                values = [graph_hits.get(g, 0.0) for g in groups]
            xs = [x + (i - (len(shown) - 1) / 2) * width for x in range(len(groups))]
            ax.bar(xs, values, width, label=config)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_ylim(0, 1)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(shown), fontsize=9)
    fig.suptitle("Cograph retrieval quality per query class")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)

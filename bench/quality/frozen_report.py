"""Tables of a frozen-split run: per cell (corpus, class, repository), every service
configuration beside the external baselines, fused against dense question by question,
each ranking stage's ablation, and the targets of issue 30. Pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.quality.datasets import Answer
from bench.quality.frozen import SLUG_PREFIX
from bench.quality.metrics import Scores, score
from bench.quality.unseen import UQuery
from bench.quality.unseen_report import paired
from bench.quality.unseen_run import TOP_K, UOutcome

ALL = "all"
BASELINE_COLUMNS: tuple[str, ...] = ("dense", "bm25", "dense+bm25")
STREAM_COLUMNS: tuple[str, ...] = ("vector", "lexical", "symbol")
Key = tuple[str, str, str]  # (corpus, class, repository label or ALL)
CONCEPT_MARGIN = 0.05  # issue 30: fused >= dense + 0.05 on concept questions
LOCALISATION_MARGIN = 0.05  # fused >= max(dense, bm25) + 0.05 on localisation
SYMBOL_R1 = 0.99


def label(outcome: UOutcome) -> str:
    """The repository a question belongs to, without its corpus: `python` for
    small-files-python, `anyio` for history-anyio."""
    name = outcome.query.repo.rsplit("/", 1)[-1]
    return name.removeprefix(outcome.query.corpus + "-")


def groups(outcomes: Sequence[UOutcome]) -> dict[Key, list[UOutcome]]:
    """Outcomes per (corpus, class, repository), and per (corpus, class) over them."""
    out: dict[Key, list[UOutcome]] = {}
    for o in outcomes:
        q = o.query
        out.setdefault((q.corpus, q.klass, label(o)), []).append(o)
        out.setdefault((q.corpus, q.klass, ALL), []).append(o)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != ALL, kv[0][2])))


def scores(members: Sequence[UOutcome], configs: Sequence[str]) -> dict[str, Scores]:
    return {c: score(o.ranks.get(c) for o in members) for c in configs}


def capped(rank: int | None) -> int:
    """A rank as a reader of the top 10 sees it: beyond 10, or absent, is 11."""
    return rank if rank is not None and rank <= TOP_K else TOP_K + 1


def verdict(a: int | None, b: int | None) -> str:
    """`worse`, `better` or `same`: where `a` ranks the answer against `b`, top 10."""
    ra, rb = capped(a), capped(b)
    return "worse" if ra > rb else "better" if ra < rb else "same"


def versus(members: Sequence[UOutcome], a: str, b: str) -> dict[str, int]:
    """How many questions `a` ranks the answer worse than, better than, same as `b`."""
    out = {"worse": 0, "better": 0, "same": 0}
    for o in members:
        out[verdict(o.ranks.get(a), o.ranks.get(b))] += 1
    return out


def stages_of(configs: Sequence[str]) -> list[str]:
    return [c.removeprefix("fused-") for c in configs if c.startswith("fused-")]


def target(key: Key, table: dict[str, Scores]) -> dict[str, Any] | None:
    """Issue 30's bar for a cell: concept (semantic) fused >= dense + 0.05, localisation
    fused >= max(dense, bm25) + 0.05, symbol fused R@1 >= 0.99."""
    klass = key[1]
    fused = table["fused"]
    if klass == "semantic":
        bar = table["dense"].mrr10 + CONCEPT_MARGIN
        return {"metric": "MRR@10", "value": fused.mrr10, "bar": bar, "met": fused.mrr10 >= bar}
    if klass == "localisation":
        bar = max(table["dense"].mrr10, table["bm25"].mrr10) + LOCALISATION_MARGIN
        return {"metric": "MRR@10", "value": fused.mrr10, "bar": bar, "met": fused.mrr10 >= bar}
    if klass == "symbol":
        return {
            "metric": "R@1",
            "value": fused.recall1,
            "bar": SYMBOL_R1,
            "met": fused.recall1 >= SYMBOL_R1,
        }
    return None


def headline(outcomes: Sequence[UOutcome], configs: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for key, members in groups(outcomes).items():
        table = scores(members, configs)
        fused, dense, bm25 = table["fused"], table["dense"], table["bm25"]
        _, stderr = paired(members, "fused", "dense")
        rows.append(
            {
                "corpus": key[0],
                "class": key[1],
                "repository": key[2],
                "n": len(members),
                "fused": fused.as_dict(),
                "dense": dense.as_dict(),
                "bm25": bm25.as_dict(),
                "dense+bm25": table["dense+bm25"].as_dict(),
                "fused_minus_dense": fused.mrr10 - dense.mrr10,
                "fused_minus_dense_stderr": stderr,
                "fused_minus_best_of_dense_bm25": fused.mrr10 - max(dense.mrr10, bm25.mrr10),
                "fused_vs_dense": versus(members, "fused", "dense"),
                "target": target(key, table),
            }
        )
    return rows


def ablations(outcomes: Sequence[UOutcome], configs: Sequence[str]) -> list[dict[str, Any]]:
    """Per cell and stage: MRR@10 with the stage skipped minus fused (negative: the stage
    helps), its paired standard error, and how many questions skipping it ranks worse /
    better than fused."""
    rows = []
    for key, members in groups(outcomes).items():
        fused = score(o.ranks.get("fused") for o in members).mrr10
        for stage in stages_of(configs):
            config = "fused-" + stage
            if not any(config in o.ranks for o in members):
                continue
            delta, stderr = paired(members, config, "fused")
            skipped = score(o.ranks.get(config) for o in members)
            rows.append(
                {
                    "corpus": key[0],
                    "class": key[1],
                    "repository": key[2],
                    "n": len(members),
                    "stage": stage,
                    "fused_mrr10": fused,
                    "skipped_mrr10": skipped.mrr10,
                    "skipped_recall1": skipped.recall1,
                    "delta": delta,
                    "stderr": stderr,
                    "versus_fused": versus(members, config, "fused"),
                }
            )
    return rows


def per_question(outcomes: Sequence[UOutcome]) -> list[dict[str, Any]]:
    return [
        {
            "id": o.query.id,
            "corpus": o.query.corpus,
            "class": o.query.klass,
            "repository": label(o),
            "text": o.query.text,
            "answers": [
                {"repo": a.repo, "path": a.path, "qualified_name": a.qualified_name}
                for a in o.query.answers
            ],
            "ranks": dict(o.ranks),
            "fused_vs_dense": verdict(o.ranks.get("fused"), o.ranks.get("dense")),
            "container_above": o.container_above,
            "nested_pairs": o.nested_pairs,
        }
        for o in outcomes
    ]


def _f(x: float) -> str:
    return f"{x:.3f}"


def _s(x: float) -> str:
    return f"{x:+.3f}"


def _cell(row: dict[str, Any]) -> str:
    repo = row["repository"]
    return (
        f"| {row['corpus']} | {row['class']} | {'**all**' if repo == ALL else repo} | {row['n']} |"
    )


def render(outcomes: Sequence[UOutcome], configs: Sequence[str], notes: Sequence[str] = ()) -> str:
    heads = headline(outcomes, configs)
    lines = [
        "### Fused against the external baselines (MRR@10 / R@1 / R@10)",
        "",
        "| corpus | class | repository | n | fused | dense | bm25 | dense+bm25 "
        "| fused - dense (2 s.e.) | fused - max(dense, bm25) | fused vs dense: worse / better "
        "/ same |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in heads:
        m = [row[c] for c in ("fused", "dense", "bm25", "dense+bm25")]
        vs = row["fused_vs_dense"]
        lines.append(
            _cell(row)
            + " "
            + " | ".join(
                f"{_f(s['mrr@10'])} / {_f(s['recall@1'])} / {_f(s['recall@10'])}" for s in m
            )
            + f" | {_s(row['fused_minus_dense'])} ({2 * row['fused_minus_dense_stderr']:.3f})"
            + f" | {_s(row['fused_minus_best_of_dense_bm25'])}"
            + f" | {vs['worse']} / {vs['better']} / {vs['same']} |"
        )
    lines += [
        "",
        "### Targets (issue 30): concept fused >= dense + 0.05 MRR@10, localisation fused >= "
        "max(dense, bm25) + 0.05, symbol R@1 >= 0.99",
        "",
        "| corpus | class | repository | n | metric | fused | bar | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in heads:
        t = row["target"]
        if t is not None:
            lines.append(
                _cell(row)
                + f" {t['metric']} | {_f(t['value'])} | {_f(t['bar'])} | "
                + f"{'yes' if t['met'] else '**no**'} |"
            )
    shown = [c for c in ("fused", *STREAM_COLUMNS, *BASELINE_COLUMNS) if c in configs]
    grouped = groups(outcomes)
    for metric, title in (("mrr10", "MRR@10"), ("recall1", "R@1"), ("recall10", "R@10")):
        lines += [
            "",
            f"### {title} of every configuration",
            "",
            "| corpus | class | repository | n | " + " | ".join(shown) + " |",
            "|---|---|---|---|" + "---|" * len(shown),
        ]
        for key, members in grouped.items():
            table = scores(members, shown)
            row = {"corpus": key[0], "class": key[1], "repository": key[2], "n": len(members)}
            lines.append(
                _cell(row) + " " + " | ".join(_f(getattr(table[c], metric)) for c in shown) + " |"
            )
    stages = stages_of(configs)
    lines += ["", "### Ablations: fused with one ranking stage skipped", ""]
    if stages:
        lines += [
            "MRR@10 with the stage skipped minus fused MRR@10 (negative: the stage helps), "
            "with two paired standard errors; `*` where the difference exceeds them.",
            "",
            "| corpus | class | repository | n | fused | " + " | ".join(stages) + " |",
            "|---|---|---|---|---|" + "---|" * len(stages),
        ]
        by_cell: dict[Key, dict[str, dict[str, Any]]] = {}
        for a in ablations(outcomes, configs):
            by_cell.setdefault((a["corpus"], a["class"], a["repository"]), {})[a["stage"]] = a
        for key, members in grouped.items():
            found = by_cell.get(key, {})
            cells = []
            for stage in stages:
                one = found.get(stage)
                if one is None:
                    cells.append("-")
                    continue
                mark = "*" if abs(one["delta"]) > 2 * one["stderr"] > 0 else ""
                cells.append(f"{_s(one['delta'])} ({2 * one['stderr']:.3f}){mark}")
            fused = score(o.ranks.get("fused") for o in members).mrr10
            row = {"corpus": key[0], "class": key[1], "repository": key[2], "n": len(members)}
            lines.append(_cell(row) + f" {_f(fused)} | " + " | ".join(cells) + " |")
    else:
        lines.append("None run (see the notes).")
    if notes:
        lines += ["", "Notes:", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def payload(
    outcomes: Sequence[UOutcome], configs: Sequence[str], extra: dict[str, Any]
) -> dict[str, Any]:
    grouped = groups(outcomes)
    return {
        "split": "frozen",
        "configs": list(configs),
        "headline": headline(outcomes, configs),
        "metrics": {
            "/".join(key): {c: s.as_dict() for c, s in scores(members, configs).items()}
            for key, members in grouped.items()
        },
        "ablations": ablations(outcomes, configs),
        # Per question, fused against dense (ranks within the top 10 for fused; dense's
        # list is kept to 300): the detail behind the worse / better / same counts.
        "fused_vs_dense": {
            o.query.id: {
                "fused": o.ranks.get("fused"),
                "dense": o.ranks.get("dense"),
                "verdict": verdict(o.ranks.get("fused"), o.ranks.get("dense")),
            }
            for o in outcomes
        },
        **extra,
    }


def outcomes_from_json(records: Sequence[dict[str, Any]]) -> list[UOutcome]:
    """Outcomes back from a run's queries.json (per_question's records), to redraw the
    tables of a finished run."""
    out = []
    for r in records:
        # Runs before answers named their repository: it is the corpus and the label.
        repo = f"{SLUG_PREFIX}/{r['corpus']}-{r['repository']}"
        answers = tuple(
            Answer(a.get("repo", repo), a["path"], a["qualified_name"], 0, 0) for a in r["answers"]
        )
        query = UQuery(r["id"], r["corpus"], r["class"], r["repository"], r["text"], answers, 0)
        outcome = UOutcome(query, dict(r["ranks"]), r["nested_pairs"], r["container_above"])
        out.append(outcome)
    return out

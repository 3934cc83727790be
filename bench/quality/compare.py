"""Compares runs of the harness that differ in something the sweep cannot replay (what code
nodes' vectors are computed from, RETRIEVAL_CODE_EMBED_TEXT), on the queries they share.

    python -m bench.quality.compare LABEL=DIR [LABEL=DIR ...] [--config fused] [--out FILE]

Each DIR holds a run's queries.json (per-query ranks). The first run is the baseline. The
table gives MRR@10 per class on the tuning half and on the held-out half; a variant is
recommended only when it is the best on the tuning half and gains on the held-out half by
report.MIN_GAIN without any class losing more than that (report.held_out_rule, as for the
k/cap and layer-weight sweeps).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.quality import frozen
from bench.quality.datasets import QUERY_CLASSES
from bench.quality.report import held_out_rule

Ranks = Mapping[str, dict[str, Any]]  # query id -> that query's record


def load(path: Path) -> dict[str, dict[str, Any]]:
    frozen.refuse_frozen_run(path, "bench.quality.compare")
    data = json.loads((path / "queries.json").read_text())
    return {q["id"]: q for q in data["queries"]}


def mrr(records: Sequence[dict[str, Any]], config: str) -> float:
    if not records:
        return 0.0
    total = 0.0
    for record in records:
        rank = record["ranks"].get(config)
        total += 1.0 / rank if rank is not None and rank <= 10 else 0.0
    return total / len(records)


def scores(runs: Mapping[str, Ranks], config: str) -> dict[str, dict[tuple[str, int], float]]:
    """MRR@10 per run, per (class or 'overall', half), over the ids every run has."""
    shared = set.intersection(*(set(r) for r in runs.values()))
    out: dict[str, dict[tuple[str, int], float]] = {}
    for label, run in runs.items():
        records = [run[i] for i in sorted(shared)]
        cells: dict[tuple[str, int], float] = {}
        for half in (0, 1):
            in_half = [r for r in records if r["half"] == half]
            cells[("overall", half)] = mrr(in_half, config)
            for klass in QUERY_CLASSES:
                chosen = [r for r in in_half if r["class"] == klass]
                if chosen:
                    cells[(klass, half)] = mrr(chosen, config)
        out[label] = cells
    return out


def recommend(table: Mapping[str, Mapping[tuple[str, int], float]]) -> dict[str, Any]:
    baseline = next(iter(table))
    best = max(table, key=lambda label: table[label][("overall", 0)])
    classes = [k for (k, half) in table[baseline] if half == 1 and k != "overall"]
    gain, worst, carries = held_out_rule(
        table[best][("overall", 1)],
        table[baseline][("overall", 1)],
        {k: table[best][(k, 1)] for k in classes},
        {k: table[baseline][(k, 1)] for k in classes},
    )
    change = best != baseline and carries
    return {
        "baseline": baseline,
        "best_on_tuning_half": best,
        "held_out_gain": gain,
        "worst_class_change": {"class": worst[1], "delta": worst[0]},
        "change": change,
    }


def render(table: Mapping[str, Mapping[tuple[str, int], float]], count: int, config: str) -> str:
    baseline = next(iter(table))
    groups = ["overall", *(c for c in QUERY_CLASSES if (c, 1) in table[baseline])]
    lines = [
        f"{config} MRR@10 on {count} shared queries (tuning half / held-out half)",
        "",
        "| run | " + " | ".join(groups) + " |",
        "|---|" + "---|" * len(groups),
    ]
    for label, cells in table.items():
        lines.append(
            f"| {label} | "
            + " | ".join(f"{cells[(g, 0)]:.3f} / {cells[(g, 1)]:.3f}" for g in groups)
            + " |"
        )
    lines += ["", f"Recommendation: {json.dumps(recommend(table))}", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=DIR")
    parser.add_argument("--config", default="fused", help="which configuration's ranks")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    runs: dict[str, Ranks] = {}
    for item in args.runs:
        label, sep, directory = item.partition("=")
        if not sep:
            parser.error(f"{item!r} must be LABEL=DIR")
        runs[label] = load(Path(directory))
    shared = set.intersection(*(set(r) for r in runs.values()))
    text = render(scores(runs, args.config), len(shared), args.config)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

"""Fusion policies swept offline over stored stream lists (issue 16).

    python -m bench.quality.fusion_sweep collect --set packages|unseen [--per-class N]
                                                 [--quick] --out FILE.pkl
    python -m bench.quality.fusion_sweep sweep FILE.pkl [FILE.pkl ...]

`collect` builds a query set (the package sets of bench.quality, every repository in
scope as the `fused` configuration searches; or the unseen corpora, each query scoped to
its repository as unseen_run does), indexes it through the real service, and stores per
query its stream lists (replay.collect's candidates, with each code hit's span), the rows
needed to name results, and the external baselines' ranks (unseen_run.baselines, or
package_baselines.ranks for the package sets). `sweep`
then replays fusion with `pipeline.rank` under each policy: containment off/on, stream
weights per query class, test-code and document weights; MRR@10 per set, class, language
and half, and the crowding figures (nested pairs, test rows and documents in the top 10).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import asyncpg

from bench.quality import datasets, frozen, package_baselines, unseen, unseen_run
from bench.quality.replay import Candidates, fused_ids, load_index, rows_of
from bench.quality.search_client import Row
from bench.quality.stack import Stack, index_all, running_stack
from cograph_api.access_rules import Viewer
from cograph_text.paths import is_test_path
from retrieval.layers import BROAD, stores_for, units_for
from retrieval.search.fusion import STREAM_NAMES
from retrieval.search.query_class import classify
from retrieval.search.query_text import has_text
from retrieval.search.ranking import FusionSettings, parse_stream_weights
from retrieval.search.search_sql import Scope
from retrieval.search.snapshot import pooled
from retrieval.search.streams import plan_streams, run_stream

K, CAP, TOP = 10, 300, 10


@dataclass
class Item:
    """One query with what the replay needs."""

    id: str
    set: str  # corpus name, or "packages"
    klass: str  # the harness's class (symbol, signature, semantic, docs, localisation)
    language: str
    half: int
    text: str
    matcher: Any  # Query.answer (packages) or UQuery (unseen): .matches(...)
    candidates: Candidates
    baselines: dict[str, int | None]

    def is_answer(self, row: Row) -> bool:
        return bool(
            self.matcher.matches(
                row.repo, row.path, row.qualified_name, row.start_line, row.end_line
            )
        )


async def _collect_one(pool: asyncpg.Pool, stack: Stack, text: str, repo: str | None) -> Candidates:
    units = {store: units_for(store, BROAD) for store in stores_for(BROAD)}
    tasks = tuple(plan_streams(units, frozenset(STREAM_NAMES), has_text(text)))
    vector = (await stack.embedder.embed([text]))[0]
    scope = Scope(Viewer(None, False), repo=repo)
    lists = await asyncio.gather(
        *(
            run_stream(
                pooled(pool),
                t,
                scope=scope,
                query=text,
                vector=vector,
                cap=CAP,
            )
            for t in tasks
        )
    )
    return Candidates(tasks, dict(zip(tasks, lists, strict=True)), text)


async def collect(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    env = dict(item.split("=", 1) for item in args.env)
    if args.set == "packages":
        data = datasets.build(datasets.PLANS["small" if args.small else "full"], workdir)
        repos = data.repositories
        pqueries = [q for q in data.queries if int(q.id.rsplit("-", 1)[1]) < args.per_class]
    else:
        sizes = unseen.SIZES["quick" if args.quick else "full"]
        sets = unseen.build(list(unseen.CORPORA), workdir, sizes)
        repos = [r for s in sets for r in s.repos]
        uqueries = [q for s in sets for q in s.queries]
    async with running_stack(workdir, env) as stack:
        await index_all(stack, repos)
        print("indexed", flush=True)
        index = await load_index(stack.pool)
        items: list[Item] = []
        gate = asyncio.Semaphore(4)
        if args.set == "packages":
            from bench.quality.runner import missing_answers

            missing = set(missing_answers(pqueries, index))
            kept = [q for q in pqueries if q not in missing]
            pk_ranks, _ = await package_baselines.ranks(stack, kept, repos)

            async def one(q: datasets.Query) -> Item:
                async with gate:
                    cands = await _collect_one(stack.pool, stack, q.text, None)
                return Item(
                    q.id, "packages", q.klass, q.language, q.half, q.text, q.answer, cands,
                    pk_ranks.get(q.id, {}),
                )  # fmt: skip

            items = list(await asyncio.gather(*(one(q) for q in kept)))
        else:
            present = {(r.repo, r.path, r.qualified_name) for r in index.values()}
            kept_u = [q for q in uqueries if all(a.key() in present for a in q.answers)]
            by_repo = {r.slug: unseen.repo_candidates(r) for r in repos}
            external = await unseen_run.baselines(stack, by_repo, kept_u)

            async def one_u(q: unseen.UQuery) -> Item:
                async with gate:
                    cands = await _collect_one(stack.pool, stack, q.text, q.repo)
                return Item(
                    q.id, q.corpus, q.klass, q.language, q.half, q.text, q, cands,
                    external.get(q.id, {}),
                )  # fmt: skip

            items = list(await asyncio.gather(*(one_u(q) for q in kept_u)))
        print(f"collected {len(items)} queries", flush=True)
    return {"items": items, "index": index}


# ---------------------------------------------------------------------------------- sweep


def mrr(ranks: Iterable[int | None]) -> float:
    values = [1.0 / r if r is not None and r <= TOP else 0.0 for r in ranks]
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Policy:
    name: str
    fusion: FusionSettings
    streams: tuple[str, ...] = ("vector", "lexical", "symbol")


def only_streams(c: Candidates, streams: Sequence[str]) -> Candidates:
    tasks = tuple(t for t in c.tasks if t.stream in streams)
    return Candidates(tasks, {t: c.hits[t] for t in tasks}, c.text)


def run_policy(
    item: Item, index: Mapping[Any, Row], policy: Policy
) -> tuple[int | None, list[Row]]:
    cands = item.candidates
    if policy.streams != ("vector", "lexical", "symbol"):
        cands = only_streams(cands, policy.streams)
    rows = rows_of(fused_ids(cands, K, CAP, None, policy.fusion), index, TOP)
    for i, row in enumerate(rows, 1):
        if item.is_answer(row):
            return i, rows
    return None, rows


def nested(rows: Sequence[Row]) -> int:
    return unseen_run.nested_pairs(rows)


Group = Callable[[Item], str]


def table(
    items: Sequence[Item],
    index: Mapping[Any, Row],
    policies: Sequence[Policy],
    group: Group,
    half: int | None = None,
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    ranks: dict[tuple[str, str], list[int | None]] = {}
    for item in items:
        if half is not None and item.half != half:
            continue
        for policy in policies:
            rank, _ = run_policy(item, index, policy)
            ranks.setdefault((group(item), policy.name), []).append(rank)
    for (g, p), values in ranks.items():
        out.setdefault(g, {})[p] = mrr(values)
        out[g]["n"] = len(values)
    return out


def base_fusion(**changes: Any) -> FusionSettings:
    return replace(FusionSettings(stream_weights={}, containment="off"), **changes)


def load(paths: Sequence[Path]) -> tuple[list[Item], dict[Any, Row]]:
    items: list[Item] = []
    index: dict[Any, Row] = {}
    for n, path in enumerate(paths):
        data = pickle.loads(path.read_bytes())
        modules = _module_ids(data["index"])
        # Row ids of different runs collide: prefix each run's items and index.
        for item in data["items"]:
            items.append(item)
            item.candidates = _prefixed(item.candidates, n, modules)
        for (store, rid), row in data["index"].items():
            index[(store, rid + n * 10**9)] = row
    return items, index


def _module_ids(index: Mapping[Any, Row]) -> set[int]:
    """Code rows that span their whole file from line 1 (the module nodes), for stored
    lists collected before spans carried the node's kind."""
    extent: dict[tuple[str, str], int] = {}
    for (store, _), row in index.items():
        if store == "code":
            key = (row.repo, row.path)
            extent[key] = max(extent.get(key, 0), row.end_line)
    return {
        rid
        for (store, rid), row in index.items()
        if store == "code" and row.start_line == 1 and row.end_line == extent[(row.repo, row.path)]
    }


def _prefixed(c: Candidates, n: int, modules: set[int]) -> Candidates:
    from retrieval.search.fusion import Span, StreamHit

    offset = n * 10**9
    hits = {
        t: [
            StreamHit(
                h.unit,
                h.id + offset,
                h.score,
                h.exact,
                Span(
                    h.span.repository_id + offset,
                    h.span.path,
                    h.span.start_line,
                    h.span.end_line,
                    getattr(h.span, "kind", "") or ("module" if h.id in modules else ""),
                    getattr(h.span, "qualified_name", ""),
                    _is_test(h.span),
                )
                if h.span
                else None,
                # Lists collected before hits named their store: documents are repo_docs.
                getattr(h, "store", "repo_docs" if h.unit == "doc" else "code"),
            )
            for h in hs
        ]
        for t, hs in c.hits.items()
    }
    return Candidates(c.tasks, hits, c.text)


def _is_test(span: Any) -> bool:
    """The span's stored test-code flag; for lists collected before spans carried it, the
    class of its path, as the indexer would have stored it."""
    stored = getattr(span, "is_test", None)
    return is_test_path(span.path) if stored is None else bool(stored)


def crowding(
    items: Sequence[Item], index: Mapping[Any, Row], policy: Policy, group: Group
) -> dict[str, dict[str, float]]:
    """Per group: nested pairs per top 10, test rows per top 10, docs rows per top 10 (on
    code questions), and how often a test row ranks above the first answer."""
    acc: dict[str, list[tuple[int, int, int, int]]] = {}
    for item in items:
        rank, rows = run_policy(item, index, policy)
        above = rows[: (rank - 1) if rank else len(rows)]
        tests = sum(1 for r in rows if r.qualified_name and is_test_path(r.path))
        docs = sum(1 for r in rows if not r.qualified_name)
        test_above = int(any(r.qualified_name and is_test_path(r.path) for r in above))
        acc.setdefault(group(item), []).append((nested(rows), tests, docs, test_above))
    out = {}
    for g, values in acc.items():
        n = len(values)
        out[g] = {
            "n": n,
            "nested_pairs": sum(v[0] for v in values) / n,
            "test_rows": sum(v[1] for v in values) / n,
            "doc_rows": sum(v[2] for v in values) / n,
            "test_above_answer": sum(v[3] for v in values) / n,
        }
    return out


def by_set_class(item: Item) -> str:
    return f"{item.set}/{item.klass}"


def by_set_class_lang(item: Item) -> str:
    return f"{item.set}/{item.klass}/{item.language}"


def by_qclass(item: Item) -> str:
    return f"{item.set}/{item.klass}/{classify(item.text)}"


def print_table(title: str, data: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> None:
    print(f"\n### {title}\n")
    print("| group | n | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for g in sorted(data):
        row = data[g]
        print(
            f"| {g} | {int(row['n'])} | " + " | ".join(f"{row.get(p, 0):.3f}" for p in names) + " |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    # `frozen` is listed only to be refused with the reason: the frozen split is a test set.
    c.add_argument("--set", choices=("packages", "unseen", "frozen"), required=True)
    c.add_argument("--small", action="store_true")
    c.add_argument("--quick", action="store_true")
    c.add_argument("--per-class", type=int, default=10**9)
    c.add_argument("--env", action="append", default=[])
    c.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("sweep")
    s.add_argument("files", nargs="+", type=Path)
    s.add_argument("--weights", action="append", default=[], help="NAME=RETRIEVAL_STREAM_WEIGHTS")
    args = parser.parse_args()
    if args.cmd == "collect":
        if args.set == "frozen":
            frozen.refuse_tuning("bench.quality.fusion_sweep")
        workdir = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
        try:
            data = asyncio.run(collect(args, workdir))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        args.out.write_bytes(pickle.dumps(data))
        print(f"wrote {args.out}")
        return
    items, index = load(args.files)
    frozen.refuse_frozen_repos((item.matcher.repo for item in items), "bench.quality.fusion_sweep")
    policies = [
        Policy("vector", base_fusion(), ("vector",)),
        Policy("lexical", base_fusion(), ("lexical",)),
        Policy("symbol", base_fusion(), ("symbol",)),
        Policy("before", base_fusion()),
        Policy("member", base_fusion(containment="member")),
        Policy("better", base_fusion(containment="better")),
        Policy("adaptive", base_fusion(containment="adaptive")),
        Policy("member-union", base_fusion(containment="member", fold="union")),
        *(
            Policy(f"adaptive r{r}", base_fusion(containment="adaptive", member_ratio=r))
            for r in (0.5, 0.7, 0.85, 1.0)
        ),
    ]
    for spec in args.weights:
        name, _, text = spec.partition("=")
        policies.append(
            Policy(
                name, base_fusion(containment="adaptive", stream_weights=parse_stream_weights(text))
            )
        )
    names = [p.name for p in policies]
    print_table("MRR@10 by set and class", table(items, index, policies, by_set_class), names)
    sys.stdout.flush()


if __name__ == "__main__":
    main()

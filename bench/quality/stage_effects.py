"""Why fused ranks an answer where it does: the answer's path through the ranking stages.

For one question, one `Search` with `explain` and a deep `top_k` gives the answer's rank and
score after every stage (`SearchResult.stages`), its rank in each stream, and what ranks
above it (layer, kind, test code). Over the questions where fused ranks the answer below a
baseline (dense), `attribute` says which stages moved answers down and by how much, how
often the service's own vector stream ranked the answer worse than the baseline did, and
what the rows above the answer were: the per-question comparison, stage by stage, that
tells a rule that loses from a corpus that is hard.

    paths = [await answer_path(stub, q.id, q.text, repo=q.repo, matches=q.matches,
                               is_test=is_test_path) for q in queries]
    table = attribute(paths, {q.id: dense_rank[q.id] for q in queries})
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api.proto_json import enum_name

DEPTH = 100  # the deepest top_k a request may ask for
TOP = 10  # ranks counted as found

Match = Callable[[str, str, str, int, int], bool]  # repo, path, qualified name, lines


@dataclass(frozen=True, slots=True)
class Move:
    stage: str
    before: int | None  # None: the stage made the list (fusion)
    after: int


@dataclass
class AnswerPath:
    """One question's answer through the pipeline (rank None: not in the first DEPTH)."""

    id: str
    rank: int | None
    moves: list[Move] = field(default_factory=list)
    streams: dict[str, int] = field(default_factory=dict)  # stream -> the answer's rank
    above: Counter[str] = field(default_factory=Counter)  # what ranks above it, by kind


def _kind(result: retrieval_pb2.SearchResult, is_test: Callable[[str], bool]) -> str:
    layer = enum_name(retrieval_pb2.Layer.DESCRIPTOR, result.layer)
    if layer == "ast_summary":
        return "summary"
    if layer in ("repo_doc", "md_collection"):
        return "document"
    if is_test(result.path):
        return "test code"
    if result.kind in ("module", "class", "struct", "interface", "trait", "impl", "enum"):
        return "container"
    return "member"


async def answer_path(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    question_id: str,
    text: str,
    *,
    repo: str,
    matches: Match,
    is_test: Callable[[str], bool],
    skip_stages: Sequence[str] = (),
    timeout_s: float = 120.0,
) -> AnswerPath:
    request = retrieval_pb2.SearchRequest(
        query=text, repo=repo, top_k=DEPTH, explain=True, skip_stages=list(skip_stages)
    )
    reply = await stub.Search(request, timeout=timeout_s)
    path = AnswerPath(question_id, None)
    for position, result in enumerate(reply.results, 1):
        found = matches(
            result.repo, result.path, result.qualified_name, result.start_line, result.end_line
        )
        if not found:
            path.above[_kind(result, is_test)] += 1
            continue
        path.rank = position
        path.moves = [
            Move(
                e.stage,
                e.rank_before if e.HasField("rank_before") else None,
                e.rank_after,
            )
            for e in result.stages
        ]
        path.streams = {
            enum_name(retrieval_pb2.Stream.DESCRIPTOR, p.stream): p.rank for p in result.provenance
        }
        break
    else:
        path.above.clear()  # not found: everything is "above", which says nothing
    return path


def _worse(rank: int | None, than: int | None) -> bool:
    """`rank` is a worse result than `than` (a miss beyond TOP is worst)."""
    a = rank if rank is not None and rank <= TOP else TOP + 1
    b = than if than is not None and than <= TOP else TOP + 1
    return a > b


def attribute(paths: Sequence[AnswerPath], baseline: Mapping[str, int | None]) -> dict[str, Any]:
    """Over the questions where fused ranks the answer worse than `baseline` (question id
    -> the baseline's rank): per stage, how many answers it moved down and up and the mean
    move; how often the vector stream alone ranked the answer below the baseline; and the
    share of each kind of row above the answer."""
    losing = [p for p in paths if _worse(p.rank, baseline.get(p.id))]
    winning = [p for p in paths if _worse(baseline.get(p.id), p.rank)]
    stages: dict[str, dict[str, float]] = {}
    for path in losing:
        for move in path.moves:
            if move.before is None:
                continue
            delta = move.after - move.before
            row = stages.setdefault(move.stage, {"down": 0, "up": 0, "rank_change": 0})
            row["down"] += delta > 0
            row["up"] += delta < 0
            row["rank_change"] += delta
    found = sum(1 for p in losing if p.rank is not None)
    for row in stages.values():
        # The mean change of the answer's rank over the losing questions it was found in.
        row["rank_change"] = round(row["rank_change"] / found, 2) if found else 0.0
    vector_worse = sum(
        1
        for p in losing
        if p.rank is not None and _worse(p.streams.get("vector"), baseline.get(p.id))
    )
    above: Counter[str] = Counter()
    for path in losing:
        above.update(path.above)
    total = sum(above.values())
    return {
        "questions": len(paths),
        "fused_worse": len(losing),
        "fused_better": len(winning),
        "answer_not_found": sum(1 for p in losing if p.rank is None),
        "vector_stream_worse_than_baseline": vector_worse,
        "stages": stages,
        "above_answer_share": {k: round(v / total, 3) for k, v in above.most_common()}
        if total
        else {},
    }

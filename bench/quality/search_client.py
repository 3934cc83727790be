"""The `Search` RPC as the harness calls it: one request in, the rows that matter out."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc

STREAM_PB: dict[str, retrieval_pb2.Stream.ValueType] = {
    "vector": retrieval_pb2.STREAM_VECTOR,
    "lexical": retrieval_pb2.STREAM_LEXICAL,
    "symbol": retrieval_pb2.STREAM_SYMBOL,
}
_STATUS = {
    retrieval_pb2.STREAM_STATUS_OK: "ok",
    retrieval_pb2.STREAM_STATUS_UNAVAILABLE: "unavailable",
    retrieval_pb2.STREAM_STATUS_SKIPPED: "skipped",
}


@dataclass(frozen=True, slots=True)
class Row:
    """A result (or graph node) reduced to what answers are matched on, plus its size."""

    repo: str
    path: str
    qualified_name: str
    start_line: int
    end_line: int
    chars: int = 0  # snippet length (0 for graph nodes)


@dataclass(frozen=True, slots=True)
class Reply:
    rows: tuple[Row, ...]
    graph: tuple[Row, ...]
    streams: dict[str, str]
    millis: float


async def search(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    text: str,
    *,
    streams: Sequence[str] = (),
    repo: str = "",
    include_graph: bool = False,
    top_k: int | None = None,
    timeout_s: float = 120.0,
) -> Reply:
    """One Search call with default layers and snippets; reranking left as configured."""
    request = retrieval_pb2.SearchRequest(
        query=text,
        repo=repo,
        include_graph=include_graph,
        streams=[STREAM_PB[name] for name in streams],
    )
    if top_k is not None:
        request.top_k = top_k
    started = time.perf_counter()
    response = await stub.Search(request, timeout=timeout_s)
    millis = (time.perf_counter() - started) * 1000
    rows = tuple(
        Row(r.repo, r.path, r.qualified_name, r.start_line, r.end_line, len(r.snippet))
        for r in response.results
    )
    graph = tuple(
        Row(n.repo, n.path, n.qualified_name, n.start_line, n.end_line)
        for n in response.graph.nodes
    )
    states = {
        "vector": _STATUS.get(response.streams.vector, "unset"),
        "lexical": _STATUS.get(response.streams.lexical, "unset"),
        "symbol": _STATUS.get(response.streams.symbol, "unset"),
    }
    return Reply(rows, graph, states, millis)

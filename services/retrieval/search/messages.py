"""Search protobuf <-> domain: requests into SearchQuery, outcomes into SearchResponse."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2 as pb
from retrieval.layers import Layer, Store
from retrieval.search.engine import SearchHit, SearchOutcome, StreamState
from retrieval.search.graph import GraphNode, GraphResult
from retrieval.search.query import SearchQuery, build_query
from retrieval.search.search_settings import SearchSettings
from svckit.errors import InvalidArgument

LAYER_TO_PB: dict[Layer, pb.Layer.ValueType] = {
    "code": pb.LAYER_CODE,
    "ast": pb.LAYER_AST,
    "ast_summary": pb.LAYER_AST_SUMMARY,
    "repo_doc": pb.LAYER_REPO_DOC,
    "md_collection": pb.LAYER_MD_COLLECTION,
}
PB_TO_LAYER: dict[int, Layer] = {int(v): k for k, v in LAYER_TO_PB.items()}
STORE_TO_PB: dict[Store, pb.Store.ValueType] = {
    "code": pb.STORE_CODE,
    "repo_docs": pb.STORE_REPO_DOCS,
    "md_collections": pb.STORE_MD_COLLECTIONS,
}
STREAM_TO_PB: dict[str, pb.Stream.ValueType] = {
    "vector": pb.STREAM_VECTOR,
    "lexical": pb.STREAM_LEXICAL,
    "symbol": pb.STREAM_SYMBOL,
}
PB_TO_STREAM: dict[int, str] = {int(v): k for k, v in STREAM_TO_PB.items()}
STATE_TO_PB: dict[StreamState, pb.StreamStatus.ValueType] = {
    "ok": pb.STREAM_STATUS_OK,
    "unavailable": pb.STREAM_STATUS_UNAVAILABLE,
    "skipped": pb.STREAM_STATUS_SKIPPED,
}
EDGE_TO_PB: dict[str, pb.EdgeKind.ValueType] = {
    "calls": pb.EDGE_KIND_CALLS,
    "imports": pb.EDGE_KIND_IMPORTS,
    "inherits": pb.EDGE_KIND_INHERITS,
    "implements": pb.EDGE_KIND_IMPLEMENTS,
    "contains": pb.EDGE_KIND_CONTAINS,
}


def _time(request: pb.SearchRequest, name: str) -> datetime | None:
    if not request.HasField(name):  # type: ignore[arg-type]
        return None
    stamp: Timestamp = getattr(request, name)
    try:
        return stamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as err:
        raise InvalidArgument(f"{name} is not a valid timestamp") from err


def _names(values: list[int], table: dict[int, str], what: str) -> list[str]:
    names = []
    for value in values:
        if value not in table:
            raise InvalidArgument(f"unknown {what} {value}")
        names.append(table[value])
    return names


def query_from_pb(request: pb.SearchRequest, settings: SearchSettings) -> SearchQuery:
    layers = _names(list(request.layers), dict(PB_TO_LAYER), "layer")
    streams = _names(list(request.streams), PB_TO_STREAM, "stream")
    return build_query(
        settings,
        text=request.query,
        repo=request.repo,
        collection=request.collection,
        layers=layers,
        top_k=request.top_k if request.HasField("top_k") else None,
        snippet_chars=request.snippet_chars if request.HasField("snippet_chars") else None,
        include_graph=request.include_graph,
        as_of=_time(request, "as_of"),
        since=_time(request, "since"),
        until=_time(request, "until"),
        streams=streams,
        skip_rerank=request.skip_rerank,
    )


def hit_to_pb(hit: SearchHit) -> pb.SearchResult:
    result = pb.SearchResult(
        id=hit.id,
        layer=LAYER_TO_PB[hit.layer],
        store=STORE_TO_PB[hit.store],
        repo=hit.repo,
        path=hit.path,
        qualified_name=hit.qualified_name,
        kind=hit.kind,
        start_line=hit.start_line,
        end_line=hit.end_line,
        commit=hit.commit,
        snippet=hit.snippet,
        truncated=hit.truncated,
        score=hit.score,
        provenance=[
            pb.Provenance(stream=STREAM_TO_PB[p.stream], rank=p.rank, score=p.score)
            for p in hit.provenance
        ],
        collection=hit.collection,
        language=hit.language,
    )
    # Optional fields stay unset ("absent"), which is not the same as a score of 0.
    if hit.vector_score is not None:
        result.vector_score = hit.vector_score
    if hit.bm25_score is not None:
        result.bm25_score = hit.bm25_score
    if hit.symbol_score is not None:
        result.symbol_score = hit.symbol_score
    if hit.rerank_score is not None:
        result.rerank_score = hit.rerank_score
    return result


def node_to_pb(node: GraphNode) -> pb.GraphNode:
    return pb.GraphNode(
        id=node.id,
        repo=node.repo,
        path=node.path,
        qualified_name=node.qualified_name,
        kind=node.kind,
        start_line=node.start_line,
        end_line=node.end_line,
        signature=node.signature,
    )


def graph_to_pb(graph: GraphResult) -> pb.Graph:
    message = pb.Graph(nodes=[node_to_pb(node) for node in graph.nodes], truncated=graph.truncated)
    for edge in graph.edges:
        item = message.edges.add(to=edge.dst, kind=EDGE_TO_PB[edge.kind])
        setattr(item, "from", edge.src)  # `from` is a Python keyword
    return message


def outcome_to_pb(outcome: SearchOutcome) -> pb.SearchResponse:
    response = pb.SearchResponse(
        query=outcome.query,
        results=[hit_to_pb(hit) for hit in outcome.results],
        streams=pb.StreamStatuses(
            vector=STATE_TO_PB[outcome.streams["vector"]],
            lexical=STATE_TO_PB[outcome.streams["lexical"]],
            symbol=STATE_TO_PB[outcome.streams["symbol"]],
            reasons={str(name): reason for name, reason in outcome.reasons.items()},
        ),
        timings_ms=outcome.timings_ms,
    )
    if outcome.graph is not None:
        response.graph.CopyFrom(graph_to_pb(outcome.graph))
    return response

"""Search protobuf <-> domain: requests into SearchQuery, outcomes into SearchResponse."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol, cast

from google.protobuf.timestamp_pb2 import Timestamp

from cograph.common.v1 import common_pb2
from cograph.retrieval.v1 import retrieval_pb2 as pb
from retrieval.indexing.refs import split_ref_slug
from retrieval.layers import Layer, Store
from retrieval.search.code_notes import CodeNote
from retrieval.search.confidence import Confidence
from retrieval.search.engine import SearchHit, SearchOutcome, StreamState
from retrieval.search.graph import GraphNode, GraphResult
from retrieval.search.query import SearchQuery, build_query
from retrieval.search.search_settings import SearchSettings
from svckit.errors import InvalidArgument


class _ProtoEnum(Protocol):
    def items(self) -> Iterable[tuple[str, int]]: ...


def _by_name(enum: _ProtoEnum, prefix: str) -> dict[str, int]:
    """A proto enum's values by their domain name: `LAYER_AST_SUMMARY` is `ast_summary`
    (the enum's own names, so a value added to the proto is mapped without a second list;
    tests/unit/test_search_messages_enums.py checks them against the domain's names)."""
    return {
        name.removeprefix(prefix).lower(): number
        for name, number in enum.items()
        if number != 0  # *_UNSPECIFIED
    }


LAYER_TO_PB = cast(dict[Layer, pb.Layer.ValueType], _by_name(pb.Layer, "LAYER_"))
PB_TO_LAYER: dict[int, Layer] = {int(v): k for k, v in LAYER_TO_PB.items()}
STORE_TO_PB = cast(dict[Store, pb.Store.ValueType], _by_name(pb.Store, "STORE_"))
STREAM_TO_PB = cast(dict[str, pb.Stream.ValueType], _by_name(pb.Stream, "STREAM_"))
PB_TO_STREAM: dict[int, str] = {int(v): k for k, v in STREAM_TO_PB.items()}
STATE_TO_PB = cast(
    dict[StreamState, pb.StreamStatus.ValueType], _by_name(pb.StreamStatus, "STREAM_STATUS_")
)
EDGE_TO_PB = cast(dict[str, pb.EdgeKind.ValueType], _by_name(pb.EdgeKind, "EDGE_KIND_"))
CONFIDENCE_TO_PB = cast(
    dict[Confidence, pb.Confidence.ValueType], _by_name(pb.Confidence, "CONFIDENCE_")
)


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
        ref=request.ref,
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
        explain=request.explain,
        skip_stages=list(request.skip_stages),
    )


def hit_to_pb(hit: SearchHit) -> pb.SearchResult:
    # A hit of an indexed ref carries its row's slug, `<repo>@<ref>` (indexing/refs.py).
    repo, ref = split_ref_slug(hit.repo)
    result = pb.SearchResult(
        id=hit.id,
        layer=LAYER_TO_PB[hit.layer],
        store=STORE_TO_PB[hit.store],
        repo=repo,
        ref=ref,
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
        confidence=CONFIDENCE_TO_PB[hit.confidence],
        notes=notes_to_pb(hit.notes),
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
    for effect in hit.stages:
        item = result.stages.add(
            stage=effect.stage, rank_after=effect.rank_after, score_after=effect.score_after
        )
        if effect.rank_before is not None:
            item.rank_before = effect.rank_before
        if effect.score_before is not None:
            item.score_before = effect.score_before
    return result


def notes_to_pb(notes: Iterable[CodeNote]) -> list[common_pb2.CodeNote]:
    return [
        common_pb2.CodeNote(id=n.id, title=n.title, score=n.score, status=n.status) for n in notes
    ]


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
        no_good_answer=outcome.no_good_answer,
        served_by=outcome.server,
        notes_reason=outcome.notes_reason,
    )
    if outcome.confidence is not None:
        response.confidence = CONFIDENCE_TO_PB[outcome.confidence]
    if outcome.graph is not None:
        response.graph.CopyFrom(graph_to_pb(outcome.graph))
    if outcome.explanation is not None:
        response.explanation.query_class = outcome.explanation.query_class
        for run in outcome.explanation.stages:
            response.explanation.stages.add(name=run.name, applied=run.applied, detail=run.detail)
    return response

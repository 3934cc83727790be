"""Gateway pieces without a network: JSON <-> protobuf, request limits, error mapping, the
MCP tool schemas agreeing with the argument models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from pydantic import BaseModel, ValidationError

from cograph.commons.v1 import commons_pb2
from cograph.retrieval.v1 import retrieval_pb2
from cograph_api import mcp_tools
from cograph_api import rest_models as models
from cograph_api.proto_json import enum_name, from_json, to_json
from gateway.errors import from_grpc
from svckit.errors import REASON_METADATA_KEY


def test_to_json_keeps_numbers_short_enums_and_utc_times() -> None:
    post = commons_pb2.Post(id="p", contributor_no=2**30, score=-3, tags=["a"])
    post.created_at.FromDatetime(datetime(2026, 8, 14, 9, 12, 4, tzinfo=UTC))
    body = to_json(post)
    assert body["contributor_no"] == 2**30 and body["score"] == -3
    assert body["created_at"] == "2026-08-14T09:12:04Z"
    job = retrieval_pb2.Job(state=retrieval_pb2.JOB_STATE_SUCCEEDED)
    job.progress.skipped["binary"] = 2
    out = to_json(job)
    assert out["state"] == "succeeded" and out["kind"] == "unspecified"
    assert out["finished_at"] is None and out["progress"]["skipped"] == {"binary": 2}
    vote = commons_pb2.VotePostResponse(direction=commons_pb2.VOTE_DIRECTION_NONE)
    assert to_json(vote)["direction"] == "none"
    assert enum_name(retrieval_pb2.JobState.DESCRIPTOR, 99) == "99"


def test_from_json_fills_nested_and_refuses_unknown_fields() -> None:
    message = from_json(
        retrieval_pb2.IndexCollectionRequest,
        {"name": "g", "documents": [{"path": "a.md", "content": "x"}], "public": None},
    )
    assert message.documents[0].path == "a.md" and message.public is False
    with pytest.raises(ValueError, match="since: not supported"):
        from_json(retrieval_pb2.GetJobRequest, {"job_id": "j", "since": datetime.now(UTC)})


@pytest.mark.parametrize(
    "body",
    [
        {"query": ""},
        {"query": "  "},
        {"query": "x", "top_k": 0},
        {"query": "x", "top_k": 101},
        {"query": "x", "top_k": True},
        {"query": "x", "snippet_chars": 79},
        {"query": "x", "snippet_chars": 4001},
        {"query": "x", "layers": ["source"]},
        {"query": "x", "layers": ["code", "code", "code", "code", "code", "code"]},
        {"query": "x\u0000"},
        {"query": "\ud800"},
        {"query": "x", "extra": 1},
    ],
)
def test_search_request_limits(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        models.SearchRequest.model_validate(body)


def test_search_request_accepts_the_contract() -> None:
    request = models.SearchRequest.model_validate(
        {
            "query": "ParseConfig",
            "repo": "github.com/a/b",
            "layers": ["code", "ast"],
            "top_k": 5,
            "snippet_chars": 80,
            "include_graph": True,
            "since": "2026-01-01T00:00:00Z",
        }
    )
    assert request.since == datetime(2026, 1, 1, tzinfo=UTC)
    message = from_json(retrieval_pb2.SearchRequest, request.model_dump(exclude_none=True))
    assert list(message.layers) == [retrieval_pb2.LAYER_CODE, retrieval_pb2.LAYER_AST]
    assert message.top_k == 5 and message.snippet_chars == 80 and message.include_graph
    assert message.since.ToDatetime(tzinfo=UTC) == datetime(2026, 1, 1, tzinfo=UTC)
    assert not message.HasField("as_of")


def test_search_response_renders_the_contract() -> None:
    reply = retrieval_pb2.SearchResponse(query="q")
    reply.streams.vector = retrieval_pb2.STREAM_STATUS_UNAVAILABLE
    result = reply.results.add(
        id="code:1",
        layer=retrieval_pb2.LAYER_AST_SUMMARY,
        store=retrieval_pb2.STORE_REPO_DOCS,
        bm25_score=0.5,
    )
    result.provenance.add(stream=retrieval_pb2.STREAM_LEXICAL, rank=1, score=0.5)
    edge = reply.graph.edges.add(to="code:2", kind=retrieval_pb2.EDGE_KIND_INHERITS)
    setattr(edge, "from", "code:1")  # `from` is a Python keyword
    body = to_json(reply)
    assert body["streams"]["vector"] == "unavailable"
    row = body["results"][0]
    assert (row["layer"], row["store"]) == ("ast_summary", "repo_docs")
    assert row["bm25_score"] == 0.5 and row["vector_score"] is None
    assert row["provenance"] == [{"stream": "lexical", "rank": 1, "score": 0.5}]
    assert body["graph"]["edges"] == [{"from": "code:1", "to": "code:2", "kind": "inherits"}]


def _rpc_error(code: grpc.StatusCode, reason: str | None = None) -> grpc.aio.AioRpcError:
    trailing = grpc.aio.Metadata(*([(REASON_METADATA_KEY, reason)] if reason else []))
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), trailing, details="why", debug_error_string=""
    )


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, 400, "invalid_argument"),
        (grpc.StatusCode.UNAUTHENTICATED, 401, "unauthenticated"),
        (grpc.StatusCode.PERMISSION_DENIED, 403, "permission_denied"),
        (grpc.StatusCode.NOT_FOUND, 404, "not_found"),
        (grpc.StatusCode.ALREADY_EXISTS, 409, "already_exists"),
        (grpc.StatusCode.UNAVAILABLE, 503, "unavailable"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "deadline_exceeded"),
        (grpc.StatusCode.INTERNAL, 502, "backend_error"),
    ],
)
def test_grpc_status_mapping(code: grpc.StatusCode, status: int, error: str) -> None:
    mapped = from_grpc(_rpc_error(code))
    assert (mapped.status, mapped.error) == (status, error)
    if status == 502:
        assert "why" not in mapped.detail  # internals stay in the backend's logs


def test_a_full_disk_is_507_whatever_the_status() -> None:
    mapped = from_grpc(_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "disk_full"))
    assert (mapped.status, mapped.error) == (507, "disk_full")
    assert from_grpc(_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED)).status == 429


def test_reason_metadata_becomes_the_error_code() -> None:
    mapped = from_grpc(_rpc_error(grpc.StatusCode.UNAVAILABLE, "semantic_search_unavailable"))
    assert mapped.body() == {"error": "semantic_search_unavailable", "detail": "why"}


ARG_MODELS: dict[str, type[BaseModel]] = {
    "cograph_search": mcp_tools.SearchArgs,
    "cograph_route": mcp_tools.RouteArgs,
    "cograph_graph": mcp_tools.GraphArgs,
    "cograph_status": mcp_tools.StatusArgs,
    "commons_search": mcp_tools.CommonsSearchArgs,
    "commons_recent": mcp_tools.CommonsRecentArgs,
    "commons_get": mcp_tools.CommonsGetArgs,
    "commons_post": mcp_tools.CommonsPostArgs,
    "commons_vote": mcp_tools.CommonsVoteArgs,
    "commons_anchors": mcp_tools.CommonsAnchorsArgs,
    "commons_anchor": mcp_tools.CommonsAnchorArgs,
    "commons_confirm_anchor": mcp_tools.CommonsConfirmAnchorArgs,
    "commons_comment": mcp_tools.CommonsCommentArgs,
    "cograph_read": mcp_tools.ReadArgs,
    "cograph_files": mcp_tools.FilesArgs,
    "cograph_grep": mcp_tools.GrepArgs,
    "cograph_references": mcp_tools.ReferencesArgs,
    "cograph_index": mcp_tools.IndexArgs,
    "cograph_job": mcp_tools.JobArgs,
    "cograph_outline": mcp_tools.OutlineArgs,
    "cograph_list_refs": mcp_tools.ListRefsArgs,
    "cograph_remove": mcp_tools.RemoveArgs,
}


@pytest.mark.parametrize("name", sorted(mcp_tools.SCHEMAS))
def test_mcp_schema_matches_its_argument_model(name: str) -> None:
    schema = mcp_tools.SCHEMAS[name]
    model = ARG_MODELS[name]
    assert set(schema["properties"]) == set(model.model_fields)
    required = {n for n, f in model.model_fields.items() if f.is_required()}
    assert set(schema["required"]) == required
    for prop in schema["properties"].values():
        assert prop["type"] in ("string", "integer", "boolean", "array")
    assert set(mcp_tools.HANDLERS) == set(mcp_tools.SCHEMAS) == set(mcp_tools.DESCRIPTIONS)
    assert set(mcp_tools.OUTPUT_SCHEMAS) == set(mcp_tools.SCHEMAS)


@pytest.mark.parametrize("name", sorted(mcp_tools.OUTPUT_SCHEMAS))
def test_mcp_output_schemas_are_valid_json_schemas(name: str) -> None:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    schema = mcp_tools.OUTPUT_SCHEMAS[name]
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"

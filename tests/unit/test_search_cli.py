"""`cograph search` argument handling and its JSON (the REST body shape)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.search_forms import answer_form
from cograph_cli import search_cmd


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["search", *argv])


def test_request_from_arguments() -> None:
    args = parse(
        "ParseConfig", "--repo", "a/b/c", "--layer", "code", "--layer", "ast_summary",
        "--top-k", "5", "--snippet-chars", "200", "--graph", "--since", "2024-03-01",
        "--until", "2024-04-01T12:00:00Z", "--as-of", "2024-05-01T00:00:00+02:00",
    )  # fmt: skip
    request = search_cmd.build_request(args)
    assert request.query == "ParseConfig" and request.repo == "a/b/c"
    assert list(request.layers) == [pb.LAYER_CODE, pb.LAYER_AST_SUMMARY]
    assert request.top_k == 5 and request.snippet_chars == 200 and request.include_graph
    assert request.since.ToDatetime(tzinfo=UTC) == datetime(2024, 3, 1, tzinfo=UTC)
    assert request.until.ToDatetime(tzinfo=UTC) == datetime(2024, 4, 1, 12, tzinfo=UTC)
    assert request.as_of.ToDatetime(tzinfo=UTC) == datetime(2024, 4, 30, 22, tzinfo=UTC)
    plain = search_cmd.build_request(parse("q"))
    assert not plain.HasField("top_k") and not plain.HasField("since") and not plain.layers


def test_bad_time_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse("q", "--since", "last tuesday")


def test_json_uses_contract_names() -> None:
    result = pb.SearchResult(
        id="code:1",
        layer=pb.LAYER_AST_SUMMARY,
        store=pb.STORE_REPO_DOCS,
        provenance=[pb.Provenance(stream=pb.STREAM_LEXICAL, rank=1, score=0.5)],
        symbol_score=0.0,
    )
    reply = pb.SearchResponse(
        query="q",
        results=[result],
        streams=pb.StreamStatuses(
            vector=pb.STREAM_STATUS_UNAVAILABLE,
            lexical=pb.STREAM_STATUS_OK,
            symbol=pb.STREAM_STATUS_SKIPPED,
        ),
    )
    body = search_cmd.response_json(reply)
    assert body["streams"] == {
        "vector": "unavailable",
        "lexical": "ok",
        "symbol": "skipped",
        "reasons": {},
    }
    first = body["results"][0]
    assert first["layer"] == "ast_summary" and first["store"] == "repo_docs"
    assert first["provenance"] == [{"stream": "lexical", "rank": 1, "score": 0.5}]
    # Absent is null; a present zero stays 0.
    assert first["vector_score"] is None and first["symbol_score"] == 0.0
    assert "graph" not in body
    edge = pb.GraphEdge(to="code:2", kind=pb.EDGE_KIND_IMPLEMENTS)
    setattr(edge, "from", "code:1")
    reply.graph.edges.append(edge)
    graph = search_cmd.response_json(reply)["graph"]
    assert graph["edges"] == [{"from": "code:1", "to": "code:2", "kind": "implements"}]
    text = search_cmd.render(reply)
    assert "vector unavailable" in text and "-implements->" in text


def test_output_says_how_far_results_can_be_trusted() -> None:
    weak = pb.SearchResult(id="code:1", confidence=pb.CONFIDENCE_LOW, qualified_name="m.f")
    reply = pb.SearchResponse(
        query="zzqqxx", results=[weak], confidence=pb.CONFIDENCE_LOW, no_good_answer=True
    )
    text = search_cmd.render(reply)
    assert "no good answer" in text and " low [" in text
    assert search_cmd.response_json(reply)["no_good_answer"] is True
    strong = pb.SearchResult(id="code:2", confidence=pb.CONFIDENCE_HIGH, qualified_name="m.g")
    good = pb.SearchResponse(query="g", results=[strong], confidence=pb.CONFIDENCE_HIGH)
    text = search_cmd.render(good)
    assert "confidence high" in text and "no good answer" not in text
    assert answer_form(search_cmd.response_json(good), False)["confidence"] == "high"

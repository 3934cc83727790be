"""The maps between the domain's names and the proto enums are derived from the protos
(search/messages.py): each must cover exactly the domain's names, so a name added on one
side and not the other fails here rather than as a KeyError in a response."""

from __future__ import annotations

from typing import get_args

from cograph.retrieval.v1 import retrieval_pb2 as pb
from retrieval.indexing.parsing.nodes import EDGE_KINDS
from retrieval.layers import Layer, Store
from retrieval.search import messages
from retrieval.search.confidence import CONFIDENCES, Confidence
from retrieval.search.engine import StreamState
from retrieval.search.fusion import STREAM_NAMES


def test_every_domain_name_has_its_proto_value_and_back() -> None:
    assert set(messages.LAYER_TO_PB) == set(get_args(Layer))
    assert set(messages.STORE_TO_PB) == set(get_args(Store))
    assert set(messages.STREAM_TO_PB) == set(STREAM_NAMES)
    assert set(messages.STATE_TO_PB) == set(get_args(StreamState))
    assert set(messages.EDGE_TO_PB) == set(EDGE_KINDS)
    assert set(messages.CONFIDENCE_TO_PB) == set(get_args(Confidence)) == set(CONFIDENCES)
    assert {v: k for k, v in messages.LAYER_TO_PB.items()} == messages.PB_TO_LAYER
    assert {v: k for k, v in messages.STREAM_TO_PB.items()} == messages.PB_TO_STREAM


def test_names_follow_the_proto_value_names() -> None:
    assert messages.LAYER_TO_PB["ast_summary"] == pb.LAYER_AST_SUMMARY
    assert messages.STORE_TO_PB["md_collections"] == pb.STORE_MD_COLLECTIONS
    assert messages.STATE_TO_PB["unavailable"] == pb.STREAM_STATUS_UNAVAILABLE
    assert messages.EDGE_TO_PB["implements"] == pb.EDGE_KIND_IMPLEMENTS
    assert messages.CONFIDENCE_TO_PB["high"] == pb.CONFIDENCE_HIGH
    # No map holds the unspecified value.
    for table in (messages.LAYER_TO_PB, messages.STORE_TO_PB, messages.STREAM_TO_PB):
        assert 0 not in table.values()

"""A repository marked for re-index after an upgrade reports stale with the reason, whatever
the branch's head says; unmarked, the head check stands."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_api.access_rules import Viewer
from retrieval.indexing.freshness import Freshness, HeadCheck
from retrieval.servicer import repository_to_proto

COMMIT = "a" * 40


def _row(reason: str) -> dict[str, Any]:
    return {
        "slug": "example.com/o/n",
        "branch": "main",
        "source": "https://example.com/o/n.git",
        "commit_sha": COMMIT,
        "indexed_at": datetime(2026, 1, 1, tzinfo=UTC),
        "public": False,
        "file_count": 2,
        "node_count": 3,
        "edge_count": 1,
        "doc_chunk_count": 0,
        "files_by_language": {"python": 2},
        "reindex_reason": reason,
        "last_checked_at": None,
        "last_synced_at": None,
    }


def test_a_marked_repository_is_stale_with_the_reason() -> None:
    current = HeadCheck(Freshness.CURRENT, COMMIT)
    reader = Viewer("alice", False)
    marked = repository_to_proto(
        _row("indexed by an earlier release; re-indexing"), current, reader
    )
    assert marked.freshness == pb.FRESHNESS_STALE
    assert marked.freshness_detail == "indexed by an earlier release; re-indexing"
    assert marked.head_commit == COMMIT
    plain = repository_to_proto(_row(""), current, reader)
    assert (plain.freshness, plain.freshness_detail) == (pb.FRESHNESS_CURRENT, "")

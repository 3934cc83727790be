"""Temporal filters on a fixture git history with fixed dates: January creates the demo,
March edits ParseConfig (adds validate), June adds billing code and docs. Node times come
from git blame, so `since` means "changed in the repository", not "re-indexed"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.retrieval import SearchEnv
from tests.integration.support.search_corpus import DEMO

pytestmark = pytest.mark.asyncio(loop_scope="session")

FEB, APR, MAY = (Timestamp(), Timestamp(), Timestamp())
FEB.FromDatetime(datetime(2024, 2, 1, tzinfo=UTC))
APR.FromDatetime(datetime(2024, 4, 1, tzinfo=UTC))
MAY.FromDatetime(datetime(2024, 5, 1, tzinfo=UTC))

# These tests ask which nodes pass a time filter, containers and members alike: containment
# (one of a class and its method) would hide the class whenever a method of it matches, so
# their searches skip that stage.
EVERYTHING = "ParseConfig validate parse load read_text retry_failed_charge Server Handle billing"


async def _names(env: SearchEnv, **fields: Any) -> set[str]:
    reply = await env.search(
        EVERYTHING, repo=DEMO, top_k=100, skip_stages=["containment"], **fields
    )
    return {r.qualified_name.rsplit(".", 1)[-1] for r in reply.results if r.store == pb.STORE_CODE}


async def test_as_of_keeps_what_existed(search_env: SearchEnv) -> None:
    names = await _names(search_env, as_of=FEB)
    assert {"load", "read_text", "Handle"} <= names
    assert "validate" not in names and "retry_failed_charge" not in names
    # ParseConfig existed in February, but not as the index holds it: March added
    # `validate` inside it, so its text did not exist at as_of and it is left out.
    assert "ParseConfig" not in names
    later = await _names(search_env, as_of=MAY)
    assert {"ParseConfig", "validate"} <= later and "retry_failed_charge" not in later


async def test_since_and_until_on_last_change(search_env: SearchEnv) -> None:
    since = await _names(search_env, since=FEB)
    assert {"ParseConfig", "validate", "retry_failed_charge"} <= since
    assert not since & {"read_text", "Handle", "load"}
    until = await _names(search_env, until=APR)
    assert {"read_text", "Handle", "validate"} <= until
    assert "retry_failed_charge" not in until
    window = await _names(search_env, since=FEB, until=APR)
    assert "validate" in window
    assert not window & {"retry_failed_charge", "read_text", "Handle"}


async def test_documents_filter_on_their_update_time(search_env: SearchEnv) -> None:
    query = "billing retries setup make"
    every = await search_env.search(query, repo=DEMO, top_k=100, layers=[pb.LAYER_REPO_DOC])
    assert {r.path for r in every.results} >= {"README.md", "docs/billing.md"}
    recent = await search_env.search(
        query, repo=DEMO, top_k=100, layers=[pb.LAYER_REPO_DOC], since=MAY
    )
    assert {r.path for r in recent.results} == {"docs/billing.md"}
    old = await search_env.search(
        query, repo=DEMO, top_k=100, layers=[pb.LAYER_REPO_DOC], until=MAY
    )
    paths = {r.path for r in old.results}
    assert "README.md" in paths and "docs/billing.md" not in paths

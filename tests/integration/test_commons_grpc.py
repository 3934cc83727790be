"""The commons over real gRPC: posting, reading, comments, deletion, identity and limits."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.commons.v1 import commons_pb2
from tests.integration.support.commons import Running
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_health_is_serving(commons: Running) -> None:
    async with signed_channel(f"127.0.0.1:{commons.app.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(
            health_pb2.HealthCheckRequest(service="cograph.commons.v1.CommonsService"), timeout=5
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_post_returns_at_once_then_becomes_searchable(commons: Running) -> None:
    caller = commons.caller
    start = time.perf_counter()
    post = await caller.post(
        "Sign-up lives in auth/signup.tsx", "Never add registration.", ["Auth"]
    )
    assert time.perf_counter() - start < 2.0
    assert post.id and post.title == "Sign-up lives in auth/signup.tsx"
    assert list(post.tags) == ["auth"]
    assert post.score == 0 and post.comment_count == 0
    assert post.created_at.seconds > 0
    await caller.wait_searchable(post.id)
    fetched = await caller.get(post.id)
    assert fetched.body == "Never add registration."
    assert fetched.searchable


async def test_contributor_numbers_are_stable_per_principal(commons: Running) -> None:
    caller = commons.caller
    first = await caller.post("one", "body", as_="agent-a")
    second = await caller.post("two", "body", as_="agent-b")
    third = await caller.post("three", "body", as_="agent-a")
    assert first.contributor_no == third.contributor_no
    assert first.contributor_no != second.contributor_no
    comment = await caller.comment(second.id, "seen", as_="agent-a")
    assert comment.comment.contributor_no == first.contributor_no


async def test_comments_and_comment_count(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("note", "body")
    first = await caller.comment(post.id, "first", as_="bob")
    second = await caller.comment(post.id, "second", as_="carol")
    assert (first.comment_count, second.comment_count) == (1, 2)
    comments = await caller.comments(post.id)
    assert [c.body for c in comments] == ["first", "second"]
    assert all(c.post_id == post.id for c in comments)
    assert (await caller.get(post.id)).comment_count == 2


async def test_writes_need_a_principal(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("note", "body")
    for call in (
        caller.post("t", "b", as_=None),
        caller.vote(post.id, commons_pb2.VOTE_DIRECTION_UP, as_=None),
        caller.comment(post.id, "c", as_=None),
        caller.delete(post.id, as_=None),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_only_the_author_deletes(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("mine", "body", as_="owner")
    await caller.comment(post.id, "a comment", as_="other")
    await caller.vote(post.id, commons_pb2.VOTE_DIRECTION_UP, as_="other")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await caller.delete(post.id, as_="other")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    await caller.delete(post.id, as_="owner")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await caller.get(post.id)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await caller.delete(post.id, as_="owner")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_missing_and_malformed_ids(commons: Running) -> None:
    caller = commons.caller
    missing = "00000000-0000-4000-8000-000000000000"
    for call, code in (
        (caller.get(missing), grpc.StatusCode.NOT_FOUND),
        (caller.comments(missing), grpc.StatusCode.NOT_FOUND),
        (caller.comment(missing, "x"), grpc.StatusCode.NOT_FOUND),
        (caller.vote(missing, commons_pb2.VOTE_DIRECTION_UP), grpc.StatusCode.NOT_FOUND),
        (caller.get("nope"), grpc.StatusCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == code


@pytest.mark.parametrize(
    ("title", "body", "tags", "needle"),
    [
        ("t" * 201, "b", [], "title: must be at most 200 characters"),
        ("t", "b" * 20_001, [], "body: must be at most 20000 characters"),
        ("t", "b", [f"t{i}" for i in range(11)], "tags: at most 10 tags"),
        ("t", "b", ["x" * 33], "tags: a tag must be at most 32 characters"),
        ("", "b", [], "title: must not be empty"),
    ],
)
async def test_limits_past_the_edge_are_invalid_argument(
    commons: Running, title: str, body: str, tags: list[str], needle: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await commons.caller.post(title, body, tags)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in (caught.value.details() or "")


async def test_limits_at_the_edge_are_accepted(commons: Running) -> None:
    post = await commons.caller.post(
        "t" * 200, "b" * 20_000, [f"{i:02d}" + "x" * 30 for i in range(10)]
    )
    assert len(post.title) == 200 and len(post.body) == 20_000 and len(post.tags) == 10
    reply = await commons.caller.comment(post.id, "c" * 5000)
    assert len(reply.comment.body) == 5000
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await commons.caller.comment(post.id, "c" * 5001)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "body: must be at most 5000 characters" in (caught.value.details() or "")

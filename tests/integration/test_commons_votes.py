"""Votes: one per user per post, up/down/withdraw, exact under many concurrent voters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

import commons as commons_package
from cograph.commons.v1 import commons_pb2
from svckit.errors import REASON_METADATA_KEY
from tests.integration.support.commons import Running

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Read by the conftest's `commons` fixture: room for the concurrent voters below.
COMMONS_SETTINGS = {"COMMONS_DB_POOL_MAX": "20"}

SELF_VOTE_MIGRATION = (
    Path(commons_package.__file__).parent / "migrations" / "0003_commons_no_self_votes.sql"
)
UP, DOWN, NONE = (
    commons_pb2.VOTE_DIRECTION_UP,
    commons_pb2.VOTE_DIRECTION_DOWN,
    commons_pb2.VOTE_DIRECTION_NONE,
)


async def test_one_vote_per_user_up_down_withdraw(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("note", "body", as_="author")
    assert (await caller.vote(post.id, UP, as_="v1")).score == 1
    assert (await caller.vote(post.id, UP, as_="v1")).score == 1  # repeating is idempotent
    reply = await caller.vote(post.id, DOWN, as_="v1")
    assert (reply.score, reply.direction) == (-1, DOWN)
    assert (await caller.vote(post.id, UP, as_="v2")).score == 0
    reply = await caller.vote(post.id, NONE, as_="v1")
    assert (reply.score, reply.direction) == (1, NONE)
    assert (await caller.vote(post.id, NONE, as_="v1")).score == 1  # nothing to withdraw
    assert (await caller.get(post.id)).score == 1


async def test_unset_direction_is_invalid(commons: Running) -> None:
    post = await commons.caller.post("note", "body")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await commons.caller.vote(post.id, commons_pb2.VOTE_DIRECTION_UNSPECIFIED)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_concurrent_voters_keep_the_score_exact(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("contested note", "body", as_="author")
    ups = [f"up-{i}" for i in range(60)]
    downs = [f"down-{i}" for i in range(25)]
    # Round one: everyone at once, several times each (the repeats must not double-count).
    await asyncio.gather(
        *(caller.vote(post.id, UP, as_=who) for who in ups * 2),
        *(caller.vote(post.id, DOWN, as_=who) for who in downs * 2),
    )
    assert (await caller.get(post.id)).score == 60 - 25
    # Round two, again all at once: 20 up-voters flip to down, 10 withdraw, 5 down-voters
    # withdraw, while the rest re-cast their votes.
    flips, withdrawn, undone = ups[:20], ups[20:30], downs[:5]
    await asyncio.gather(
        *(caller.vote(post.id, DOWN, as_=who) for who in flips),
        *(caller.vote(post.id, NONE, as_=who) for who in withdrawn),
        *(caller.vote(post.id, NONE, as_=who) for who in undone),
        *(caller.vote(post.id, UP, as_=who) for who in ups[30:]),
        *(caller.vote(post.id, DOWN, as_=who) for who in downs[5:]),
    )
    expected = len(ups[30:]) - len(flips) - len(downs[5:])
    assert (await caller.get(post.id)).score == expected
    (row,) = await commons.sql(
        "SELECT p.score, (SELECT coalesce(sum(value), 0) FROM votes v WHERE v.post_id = p.id) "
        "AS total, (SELECT count(*) FROM votes v WHERE v.post_id = p.id) AS n "
        "FROM posts p WHERE p.id = $1::uuid",
        post.id,
    )
    assert row["score"] == row["total"] == expected
    assert row["n"] == len(ups) - len(withdrawn) + len(downs) - len(undone)


async def test_authors_cannot_vote_on_their_own_notes(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("my note", "body", as_="author")
    for direction in (UP, DOWN):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await caller.vote(post.id, direction, as_="author")
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "own" in (caught.value.details() or "")
        trailing: Any = caught.value.trailing_metadata() or ()
        assert (REASON_METADATA_KEY, "own_post_vote") in [(k, v) for k, v in trailing]
    # Withdrawing stays allowed; another principal's vote counts as before.
    assert (await caller.vote(post.id, NONE, as_="author")).score == 0
    assert (await caller.vote(post.id, UP, as_="reader")).score == 1
    (row,) = await commons.sql("SELECT count(*) AS n FROM votes WHERE post_id = $1::uuid", post.id)
    assert row["n"] == 1


async def test_migration_removes_self_votes_cast_before_the_rule(commons: Running) -> None:
    caller = commons.caller
    post = await caller.post("older note", "body", as_="old-author")
    await caller.vote(post.id, UP, as_="fan")
    # A self-vote as the table could hold it before the rule existed.
    await commons.sql(
        "INSERT INTO votes (post_id, user_id, value) SELECT p.id, p.author_id, 1 FROM posts p "
        "WHERE p.id = $1::uuid",
        post.id,
    )
    await commons.sql("UPDATE posts SET score = 2 WHERE id = $1::uuid", post.id)
    conn = await asyncpg.connect(commons.database_url)
    try:
        await conn.execute(SELF_VOTE_MIGRATION.read_text())  # as svckit.migrations runs it
    finally:
        await conn.close()
    assert (await caller.get(post.id)).score == 1
    (row,) = await commons.sql("SELECT count(*) AS n FROM votes WHERE post_id = $1::uuid", post.id)
    assert row["n"] == 1

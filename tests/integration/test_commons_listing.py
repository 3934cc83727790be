"""The commons' note listing and display names over real gRPC: newest first and by score,
the tag filter, signed cursors (edited, replayed against another order, limits at their
edges), hidden notes listed to admins only, and authors' names on every surface."""

from __future__ import annotations

import grpc
import pytest

from cograph.commons.v1 import commons_pb2
from cograph_api import limits
from svckit.errors import reason_of
from tests.integration.support.commons import Caller, Running

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Short snippets, so that the listing's bodies are visibly cut as search cuts them.
COMMONS_SETTINGS = {"SEARCH_BODY_SNIPPET": "12"}
UP = commons_pb2.VOTE_DIRECTION_UP
TOP = commons_pb2.POST_SORT_TOP


async def _refused(call: object, code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    assert caught.value.code() == code, caught.value.details()
    return caught.value.details() or ""


async def _all_pages(caller: Caller, **options: object) -> list[commons_pb2.PostSummary]:
    seen: list[commons_pb2.PostSummary] = []
    cursor = ""
    while True:
        page = await caller.list_posts(cursor=cursor, **options)  # type: ignore[arg-type]
        seen.extend(page.posts)
        if not page.next_cursor:
            return seen
        cursor = page.next_cursor


async def test_listing_orders_filters_and_pages_with_signed_cursors(commons: Running) -> None:
    caller = commons.caller
    posted = [
        await caller.post(f"note {i}", f"body of note number {i}", ["even" if i % 2 else "odd"])
        for i in range(5)
    ]
    # Votes from others: note 1 scores 2, note 3 scores 1, the rest 0.
    for voter, post in (("bob", posted[1]), ("carol", posted[1]), ("bob", posted[3])):
        await caller.vote(post.id, UP, as_=voter)

    newest = await _all_pages(caller, limit=2)
    assert [p.id for p in newest] == [p.id for p in reversed(posted)]
    first = newest[0]
    assert first.title == "note 4" and first.body == "body of note"
    assert first.body_truncated and first.body_chars == len("body of note number 4")
    assert first.contributor_no == posted[4].contributor_no and not first.hidden
    assert not first.HasField("author_name")

    top = await _all_pages(caller, sort=TOP, limit=2)
    assert [p.title for p in top] == ["note 1", "note 3", "note 4", "note 2", "note 0"]
    assert [p.score for p in top] == [2, 1, 0, 0, 0]

    even = await _all_pages(caller, tag=" EVEN ", limit=1)
    assert [p.title for p in even] == ["note 3", "note 1"]
    assert (await caller.list_posts(tag="nothing-has-this")).posts == []

    # A cursor continues only the listing it was issued for, and only unedited.
    page = await caller.list_posts(limit=2)
    assert len(page.posts) == 2 and page.next_cursor
    cursor = page.next_cursor
    for call in (
        caller.list_posts(cursor=cursor, sort=TOP),
        caller.list_posts(cursor=cursor, tag="even"),
        caller.list_posts(cursor=cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")),
        caller.list_posts(cursor="c1.e30.AAAA"),
        caller.list_posts(cursor="x" * (limits.CURSOR_MAX_CHARS + 1)),
    ):
        assert "cursor" in await _refused(call)
    following = await caller.list_posts(cursor=cursor, limit=2)
    assert [p.title for p in following.posts] == ["note 2", "note 1"]

    # The page size at its edges: 0 is the default, 1..max are pages, past them refused.
    assert len((await caller.list_posts(limit=1)).posts) == 1
    assert len((await caller.list_posts(limit=limits.POSTS_LIMIT_MAX)).posts) == 5
    for bad in (limits.POSTS_LIMIT_MAX + 1, -1):
        assert "limit" in await _refused(caller.list_posts(limit=bad))
    assert "sort" in await _refused(caller.list_posts(sort=7))
    assert "tag" in await _refused(caller.list_posts(tag="two words"))
    assert "tag" in await _refused(caller.list_posts(tag="t" * (limits.TAG_MAX_CHARS + 1)))


async def test_hidden_notes_are_listed_to_admins_only(commons: Running) -> None:
    caller = commons.caller
    kept = await caller.post("kept", "fine", as_="author")
    hidden = await caller.post("hidden", "spam", as_="author")
    await caller.stub.SetPostHidden(
        commons_pb2.SetPostHiddenRequest(post_id=hidden.id, hidden=True, reason="spam"),
        metadata=Caller.md("mod", admin=True),
    )
    for who in ("author", "bob", None):
        listed = await caller.list_posts(as_=who)
        assert [p.id for p in listed.posts] == [kept.id], who
    admin = await caller.list_posts(as_="mod", admin=True)
    assert [(p.id, p.hidden) for p in admin.posts] == [(hidden.id, True), (kept.id, False)]


async def test_display_names_are_shown_beside_numbers_and_checked(commons: Running) -> None:
    caller = commons.caller
    before = await caller.profile(as_="dana")
    assert not before.HasField("contributor_no") and not before.HasField("display_name")
    anonymous = await caller.profile(as_=None)
    assert not anonymous.HasField("contributor_no")

    # Setting a name gives a number to a principal that never wrote; trimmed, runs of
    # spaces made one.
    named = await caller.set_name("  Dana   the <b>Builder</b> ", as_="dana")
    assert named.display_name == "Dana the <b>Builder</b>" and named.contributor_no > 0
    assert await caller.profile(as_="dana") == named

    post = await caller.post("named note", "who wrote this", as_="dana")
    assert post.author_name == "Dana the <b>Builder</b>"
    assert post.contributor_no == named.contributor_no
    comment = await caller.comment(post.id, "me", as_="dana")
    assert comment.comment.author_name == post.author_name
    other = await caller.comment(post.id, "someone", as_="erin")
    assert not other.comment.HasField("author_name")
    assert [c.author_name for c in await caller.comments(post.id)] == [post.author_name, ""]
    assert (await caller.get(post.id)).author_name == post.author_name
    assert (await caller.list_posts()).posts[0].author_name == post.author_name
    await caller.wait_searchable(post.id)
    hits = (await caller.search("who wrote this note")).results
    assert [h.author_name for h in hits if h.id == post.id] == [post.author_name]

    # Unique ignoring case; the holder may set it again.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await caller.set_name("dana THE <b>builder</b>", as_="erin")
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert reason_of(caught.value) == "display_name_taken"
    assert (await caller.set_name("Dana the <b>Builder</b>", as_="dana")) == named

    # Hostile names are refused, naming the field.
    for hostile in (
        "bad\nname",
        "tab\there",
        "nul\x00",
        "right\u202eleft",  # a bidirectional override
        "zero\u200bwidth",
        "x" * (limits.DISPLAY_NAME_MAX_CHARS + 1),
        "Admin",
        "contributor 3",
        "#12",
    ):
        assert "display_name" in await _refused(caller.set_name(hostile, as_="erin"))
    longest = await caller.set_name("y" * limits.DISPLAY_NAME_MAX_CHARS, as_="erin")
    assert len(longest.display_name) == limits.DISPLAY_NAME_MAX_CHARS
    await _refused(caller.set_name("nobody", as_=None), grpc.StatusCode.UNAUTHENTICATED)

    # A blank name clears it: authors are shown by number again.
    cleared = await caller.set_name("   ", as_="dana")
    assert not cleared.HasField("display_name") and cleared.contributor_no == named.contributor_no
    assert not (await caller.get(post.id)).HasField("author_name")

"""The commons' own limits over gRPC, at their edges: what the gateway publishes
(cograph_api.limits) is what the service itself accepts, for callers that bypass the gateway
(the operator CLI) as much as for the gateway. Past a limit: INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
import pytest

from cograph_api import limits
from tests.integration.support.commons import Running

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _invalid(call: Callable[[], Awaitable[object]], field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(field), caught.value.details()


async def test_note_limits(commons: Running) -> None:
    caller = commons.caller
    title, body = "t" * limits.POST_TITLE_MAX_CHARS, "b" * limits.POST_BODY_MAX_CHARS
    tags = [f"{i}" * limits.TAG_MAX_CHARS for i in range(limits.POST_TAGS_MAX)]
    post = await caller.post(title, body, tags)
    assert (len(post.title), len(post.body), len(post.tags)) == (
        limits.POST_TITLE_MAX_CHARS,
        limits.POST_BODY_MAX_CHARS,
        limits.POST_TAGS_MAX,
    )
    await _invalid(lambda: caller.post(title + "t", "b"), "title")
    await _invalid(lambda: caller.post("t", body + "b"), "body")
    await _invalid(lambda: caller.post("t", "b", [*tags[:-1], "x", "y"]), "tags")
    await _invalid(lambda: caller.post("t", "b", ["x" * (limits.TAG_MAX_CHARS + 1)]), "tags")

    comment = "c" * limits.COMMENT_MAX_CHARS
    assert (await caller.comment(post.id, comment)).comment_count == 1
    await _invalid(lambda: caller.comment(post.id, comment + "c"), "body")


async def test_query_limit(commons: Running) -> None:
    query = "q" * limits.COMMONS_QUERY_MAX_CHARS
    assert (await commons.caller.search(query)).query == query
    await _invalid(lambda: commons.caller.search(query + "q"), "query")

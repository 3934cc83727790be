"""Moderation through the REST gateway: admin keys only (403 for others, before the commons
is asked), the reason bounded by the published limit, a hidden note 404 to other keys."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from cograph_api import limits
from tests.integration.support.stacks import Stack, gateway_stack

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    async with gateway_stack(
        pg_server_url, embedder_address, tmp_path_factory.mktemp("gw"), services=("commons",)
    ) as running:
        yield running


async def test_only_admin_keys_moderate_and_read_the_log(stack: Stack) -> None:
    async with (
        stack.client(stack.admin_key) as admin,
        stack.client(await stack.key("alice")) as alice,
        stack.client(await stack.key("bob")) as bob,
    ):
        note = (await alice.post("/v1/posts", json={"title": "Spam", "body": "Buy."})).json()
        comment = (await bob.post(f"/v1/posts/{note['id']}/comments", json={"body": "x"})).json()
        for path in (
            f"/v1/posts/{note['id']}/hide",
            f"/v1/posts/{note['id']}/unhide",
            f"/v1/comments/{comment['comment']['id']}/hide",
        ):
            refused = await bob.post(path, json={"reason": "spam"})
            assert refused.status_code == 403 and refused.json()["error"] == "permission_denied"
        assert (await bob.get("/v1/moderation/log")).status_code == 403
        assert (await bob.delete(f"/v1/posts/{note['id']}")).status_code == 403

        too_long = {"reason": "x" * (limits.MODERATION_REASON_MAX_CHARS + 1)}
        bad = await admin.post(f"/v1/posts/{note['id']}/hide", json=too_long)
        assert bad.status_code == 400 and "reason" in bad.json()["detail"]
        blank = await admin.post(f"/v1/posts/{note['id']}/hide", json={"reason": " "})
        assert blank.status_code == 400

        hidden = await admin.post(f"/v1/posts/{note['id']}/hide", json={"reason": "spam"})
        assert hidden.status_code == 200, hidden.text
        assert hidden.json() == {"post_id": note["id"], "hidden": True, "changed": True}
        assert (await bob.get(f"/v1/posts/{note['id']}")).status_code == 404
        assert (await alice.get(f"/v1/posts/{note['id']}")).json()["hidden"] is True

        no_reason = await admin.delete(f"/v1/posts/{note['id']}")
        assert no_reason.status_code == 400 and "reason" in no_reason.json()["detail"]
        deleted = await admin.delete(f"/v1/posts/{note['id']}", params={"reason": "spam"})
        assert deleted.status_code == 204
        log = await admin.get("/v1/moderation/log", params={"limit": 10})
        assert log.status_code == 200
        assert [(e["action"], e["target"], e["principal_id"]) for e in log.json()["entries"]] == [
            ("delete", "post", "admin"),
            ("hide", "post", "admin"),
        ]
        too_many = await admin.get(
            "/v1/moderation/log", params={"limit": limits.MODERATION_LOG_LIMIT_MAX + 1}
        )
        assert too_many.status_code == 400

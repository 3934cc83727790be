"""GATEWAY_ALLOW_ANONYMOUS=true: requests without a key act as no principal (public data,
no writes); a key that is given must still be valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.support.stacks import gateway_stack

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_anonymous_reads_but_cannot_write(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    async with (
        gateway_stack(
            pg_server_url,
            embedder_address,
            tmp_path,
            services=("commons", "retrieval"),
            GATEWAY_ALLOW_ANONYMOUS="true",
        ) as stack,
        stack.client() as anon,
        stack.client(await stack.key("alice")) as alice,
    ):
        post = (await alice.post("/v1/posts", json={"title": "t", "body": "b"})).json()
        read = await anon.get(f"/v1/posts/{post['id']}")
        assert read.status_code == 200 and read.json()["title"] == "t"
        assert (await anon.get("/api/repositories")).json() == {"repositories": []}
        write = await anon.post("/v1/posts", json={"title": "t", "body": "b"})
        assert write.status_code == 401, write.text
        assert (await anon.get("/api/keys")).status_code == 403
        bad = await anon.get("/api/repositories", headers={"Authorization": "Bearer cg_nope"})
        assert bad.status_code == 401

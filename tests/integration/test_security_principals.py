"""Principals are identities (penetration test finding 8): a key named `admin` acted for the
operator's principal and deleted its note. Reserved names are refused, a principal another
key has is refused unless a second key for it is asked for (with its admin flag), and the
database holds both rules whatever writes to it."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio

from cograph_api import limits
from cograph_api.admin_keys import bootstrap_admin_key, generate_key, hash_key
from cograph_cli import keys_cmd
from gateway.keys_store import MIGRATIONS
from svckit.migrations import migrate
from tests.integration.support.databases import fresh_database
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


@pytest_asyncio.fixture(loop_scope="session")
async def admin(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with stack.client(stack.admin_key) as client:
        yield client


async def test_reserved_names_are_refused(admin: httpx.AsyncClient) -> None:
    for body in (
        {"name": "admin"},  # the finding: the name is the default principal
        {"name": "Admin"},
        {"name": "ROOT"},
        {"name": "innocent", "principal_id": "admin"},
        {"name": "innocent", "principal_id": "system", "admin": True},
        {"name": "operator", "principal_id": "ci-bot"},
        {"name": "again", "principal_id": "admin", "existing_principal": True, "admin": True},
    ):
        reply = await admin.post("/api/keys", json=body)
        assert reply.status_code == 400, (body, reply.text)
        assert reply.json()["error"] == "invalid_argument" and "reserved" in reply.json()["detail"]
    keys = (await admin.get("/api/keys")).json()["keys"]
    reserved = [k for k in keys if k["principal_id"].lower() in limits.RESERVED_PRINCIPALS]
    assert reserved and all(k["admin"] and k["principal_id"] == "admin" for k in reserved)


async def test_a_principal_is_taken_once_unless_a_second_key_is_asked_for(
    stack: Stack, admin: httpx.AsyncClient
) -> None:
    first = await admin.post("/api/keys", json={"name": "deploy-bot"})
    assert first.status_code == 201, first.text

    clash = await admin.post("/api/keys", json={"name": "other", "principal_id": "deploy-bot"})
    assert clash.status_code == 409 and clash.json()["error"] == "principal_exists"

    # Rotation: explicit, and only with the principal's admin flag.
    raised = await admin.post(
        "/api/keys",
        json={
            "name": "deploy-bot-2",
            "principal_id": "deploy-bot",
            "existing_principal": True,
            "admin": True,
        },
    )
    assert raised.status_code == 409 and raised.json()["error"] == "principal_admin_mismatch"
    second = await admin.post(
        "/api/keys",
        json={"name": "deploy-bot-2", "principal_id": "deploy-bot", "existing_principal": True},
    )
    assert second.status_code == 201, second.text
    assert second.json()["principal_id"] == "deploy-bot" and second.json()["admin"] is False

    missing = await admin.post(
        "/api/keys", json={"name": "ghost", "existing_principal": True, "admin": False}
    )
    assert missing.status_code == 404 and missing.json()["error"] == "principal_not_found"

    # An admin principal cannot be joined by a non-admin key either.
    boss = await admin.post("/api/keys", json={"name": "boss", "admin": True})
    assert boss.status_code == 201
    joined = await admin.post(
        "/api/keys", json={"name": "mole", "principal_id": "boss", "existing_principal": True}
    )
    assert joined.status_code == 409 and joined.json()["error"] == "principal_admin_mismatch"


async def test_two_keys_created_at_once_for_one_new_principal_do_not_both_pass(
    admin: httpx.AsyncClient,
) -> None:
    replies = await asyncio.gather(
        *(
            admin.post("/api/keys", json={"name": f"racer-{i}", "principal_id": "racer"})
            for i in range(4)
        )
    )
    assert sorted(r.status_code for r in replies) == [201, 409, 409, 409]


async def test_a_failed_grant_frees_the_principal(admin: httpx.AsyncClient) -> None:
    # This stack runs no retrieval service, so the grant fails after the key is stored.
    reply = await admin.post(
        "/api/keys", json={"name": "granted-bot", "grant_repositories": ["github.com/a/b"]}
    )
    assert reply.status_code == 503, reply.text
    again = await admin.post("/api/keys", json={"name": "granted-bot"})
    assert again.status_code == 201, again.text


async def test_a_non_admin_key_cannot_delete_the_admins_note(
    stack: Stack, admin: httpx.AsyncClient
) -> None:
    note = await admin.post("/v1/posts", json={"title": "Operator's note", "body": "Keep me."})
    assert note.status_code == 201, note.text
    post_id = note.json()["id"]
    # The attack: a key named admin. Refused, so no non-admin key acts for `admin`.
    assert (await admin.post("/api/keys", json={"name": "admin"})).status_code == 400
    made = await admin.post("/api/keys", json={"name": "mallory"})
    async with stack.client(made.json()["key"]) as mallory:
        denied = await mallory.delete(f"/v1/posts/{post_id}")
        assert denied.status_code == 403 and denied.json()["error"] == "permission_denied"
        # Giving a reason does not make a non-admin a moderator.
        denied = await mallory.delete(f"/v1/posts/{post_id}", params={"reason": "spam"})
        assert denied.status_code == 403
    assert (await admin.get(f"/v1/posts/{post_id}")).status_code == 200


async def test_the_database_refuses_colliding_principals(stack: Stack) -> None:
    conn = await asyncpg.connect(stack.database_url)
    try:

        async def insert(principal: str, admin: bool) -> None:
            secret = generate_key()
            await conn.execute(
                "INSERT INTO api_keys (id, name, principal_id, admin, key_hash, key_prefix) "
                "VALUES (gen_random_uuid(), $1, $1, $2, $3, 'cg_x')",
                principal,
                admin,
                hash_key(secret),
            )

        # What an older gateway would insert: a non-admin key for the admin's principal.
        with pytest.raises(asyncpg.IntegrityConstraintViolationError):
            await insert("admin", False)
        await insert("db-admin", True)
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await insert("db-admin", False)
        # A reserved principal is an admin's only, even before any admin key exists for it.
        with pytest.raises(asyncpg.CheckViolationError):
            await insert("system", False)
        await insert("db-writer", False)  # the trigger gives a new principal its row
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await insert("db-writer", True)
    finally:
        await conn.close()


def test_the_migration_reserves_the_same_names() -> None:
    sql = (MIGRATIONS / "0002_key_principals.sql").read_text()
    listed = "('" + "', '".join(
        ["admin", "administrator", "root", "system", "operator", "anonymous", "public", "cograph"]
    )
    assert sql.count(listed) == 2
    assert set(listed[2:].split("', '")) == limits.RESERVED_PRINCIPALS


async def test_the_migration_revokes_keys_that_already_collide(
    pg_server_url: str, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    first.mkdir()
    (first / "0001_api_keys.sql").write_text((MIGRATIONS / "0001_api_keys.sql").read_text())
    async with fresh_database(pg_server_url, prefix="keys") as url:
        await migrate(url, "gateway", first)
        conn = await asyncpg.connect(url)
        try:
            rows = [("admin", True), ("admin", False), ("root", False), ("ci", False)]
            for principal, admin in rows:
                await conn.execute(
                    "INSERT INTO api_keys (id, name, principal_id, admin, key_hash, key_prefix) "
                    "VALUES (gen_random_uuid(), $1, $1, $2, $3, 'cg_x')",
                    principal,
                    admin,
                    hash_key(generate_key()),
                )
            await migrate(url, "gateway", MIGRATIONS)
            keys = await conn.fetch(
                "SELECT principal_id, admin, revoked_at IS NOT NULL AS revoked FROM api_keys"
            )
            principals = {
                row["principal_id"]: row["admin"]
                for row in await conn.fetch("SELECT principal_id, admin FROM key_principals")
            }
        finally:
            await conn.close()
    by_state = sorted((k["principal_id"].split(".")[0], k["admin"], k["revoked"]) for k in keys)
    assert by_state == [
        ("admin", False, True),
        ("admin", True, False),
        ("ci", False, False),
        ("root", False, True),
    ]
    assert principals["admin"] is True and principals["ci"] is False
    moved = [k["principal_id"] for k in keys if k["revoked"]]
    assert all(".collided-" in p for p in moved)


async def test_an_operator_bootstrap_key_joins_the_admin_principal(stack: Stack) -> None:
    # The operator path (`cograph keys bootstrap`) still adds admin keys for `admin`.
    outcome, _ = await bootstrap_admin_key(stack.database_url, generate_key(), MIGRATIONS)
    assert outcome.value == "created"


async def test_keys_cli_refuses_reserved_names_and_asks_for_rotation(
    stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COGRAPH_GATEWAY_URL", stack.url)
    monkeypatch.setenv("COGRAPH_API_KEY", stack.admin_key)
    parser = argparse.ArgumentParser(prog="cograph")
    keys_cmd.register(parser.add_subparsers(dest="command", required=True))

    async def run(*argv: str) -> tuple[int, str]:
        args = parser.parse_args(["keys", *argv])
        code: int = await asyncio.to_thread(args.handler, args)
        return code, capsys.readouterr().out

    code, out = await run("create", "--name", "admin", "--json")
    assert code == 1 and json.loads(out)["error"] == "invalid_argument" and "reserved" in out
    code, out = await run("create", "--name", "cli-bot", "--json")
    assert code == 0, out
    code, out = await run("create", "--name", "cli-bot-2", "--principal", "cli-bot", "--json")
    assert code == 1 and json.loads(out)["error"] == "principal_exists"
    code, out = await run(
        "create", "--name", "cli-bot-2", "--principal", "cli-bot", "--existing-principal", "--json"
    )
    assert code == 0 and json.loads(out)["principal_id"] == "cli-bot"

"""The admin-key bootstrap, `cograph keys` and `cograph access` against a live gateway."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from cograph_api.admin_keys import ensure_admin_key
from gateway.keys_store import MIGRATIONS
from tests.integration.support.stacks import gateway_stack, wait_job

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def cograph(env: dict[str, str], *argv: str) -> tuple[int, str]:
    """Runs the `cograph` command in a child process; its exit code and output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cograph_cli",
        *argv,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def cli(env: dict[str, str], *argv: str) -> tuple[int, str]:
    return await cograph(env, "keys", *argv)


async def test_bootstrap_and_keys_cli(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    async with gateway_stack(
        pg_server_url, embedder_address, tmp_path / "data", services=("commons",)
    ) as stack:
        admin_file = stack.data_dir / "admin.key"
        assert stat.S_IMODE(admin_file.stat().st_mode) == 0o600
        assert admin_file.read_text().strip() == stack.admin_key
        # An active admin key exists: the bootstrap creates nothing the second time.
        assert (
            await ensure_admin_key(stack.database_url, tmp_path / "elsewhere", MIGRATIONS) is None
        )
        assert not (tmp_path / "elsewhere" / "admin.key").exists()

        # No COGRAPH_API_KEY: the CLI reads the admin key from the data directory.
        env = {"COGRAPH_GATEWAY_URL": stack.url, "COGRAPH_DATA_DIR": str(stack.data_dir)}
        code, out = await cli(env, "create", "--name", "ci-bot", "--json")
        assert code == 0, out
        created = json.loads(out)
        assert created["principal_id"] == "ci-bot" and created["key"].startswith("cg_")

        code, out = await cli(env, "list")
        assert code == 0 and "ci-bot -> ci-bot" in out and created["key"] not in out

        bot_env = {"COGRAPH_GATEWAY_URL": stack.url, "COGRAPH_API_KEY": created["key"]}
        code, out = await cli(bot_env, "list", "--json")
        assert code == 1 and json.loads(out)["error"] == "permission_denied"

        code, out = await cli(env, "revoke", created["id"])
        assert code == 0 and "revoked" in out
        code, out = await cli(bot_env, "list")
        assert code == 1 and "unauthenticated" in out

        code, out = await cli(env, "create", "--name", "bad name")
        assert code == 1 and "error" in out
        code, out = await cli(
            {"COGRAPH_GATEWAY_URL": stack.url, "COGRAPH_DATA_DIR": str(tmp_path / "empty")}, "list"
        )
        assert code == 1 and "no API key" in out


async def test_access_cli_grants_revokes_and_publishes(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    async with gateway_stack(
        pg_server_url, embedder_address, tmp_path / "data", services=("retrieval",)
    ) as stack:
        admin_env = {"COGRAPH_GATEWAY_URL": stack.url, "COGRAPH_API_KEY": stack.admin_key}
        async with stack.client(stack.admin_key) as admin:
            started = await admin.post(
                "/api/collections",
                json={
                    "name": "handbook",
                    "documents": [
                        {"path": "refunds.md", "content": "# Refunds\n\nWithin 30 days."}
                    ],
                },
            )
            assert started.status_code == 202, started.text
            assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"

        async def dana_sees() -> list[str]:
            async with stack.client(await stack.key("dana")) as dana:
                reply = await dana.get("/api/collections")
            return [c["name"] for c in reply.json()["collections"]]

        assert await dana_sees() == []
        code, out = await cograph(admin_env, "access", "grant", "dana", "--collection", "handbook")
        assert code == 0 and "dana may now read collection handbook" in out, out
        assert await dana_sees() == ["handbook"]
        code, out = await cograph(
            admin_env, "access", "grant", "dana", "--collection", "handbook", "--json"
        )
        assert code == 0 and json.loads(out) == {"changed": False}, out
        # Raising the grant to write and lowering it again keeps her reading.
        write_role = ("dana", "--collection", "handbook", "--role", "write")
        code, out = await cograph(admin_env, "access", "grant", *write_role)
        assert code == 0 and "dana may now re-index collection handbook" in out, out
        code, out = await cograph(admin_env, "access", "revoke", *write_role)
        assert code == 0 and "may no longer re-index collection handbook" in out, out
        assert await dana_sees() == ["handbook"]
        code, out = await cograph(admin_env, "access", "grant", *write_role[:3], "--role", "admin")
        assert code == 2 and "--role" in out, out
        code, out = await cograph(admin_env, "access", "revoke", "dana", "--collection", "handbook")
        assert code == 0 and "revoked" in out, out
        assert await dana_sees() == []

        code, out = await cograph(admin_env, "access", "public", "--collection", "handbook")
        assert code == 0 and "is now public" in out, out
        assert await dana_sees() == ["handbook"]
        code, out = await cograph(admin_env, "access", "private", "--collection", "handbook")
        assert code == 0 and "is now private" in out, out
        assert await dana_sees() == []

        # Errors are one plain line (or JSON) and exit 1: not an admin, unknown target, a
        # malformed principal; argparse itself rejects a missing target.
        dana_env = {"COGRAPH_GATEWAY_URL": stack.url, "COGRAPH_API_KEY": await stack.key("dana")}
        code, out = await cograph(dana_env, "access", "public", "--collection", "handbook")
        assert code == 1 and "permission_denied" in out, out
        code, out = await cograph(
            admin_env, "access", "grant", "dana", "--repo", "example.com/no/such", "--json"
        )
        assert code == 1 and json.loads(out)["error"] == "not_found", out
        code, out = await cograph(admin_env, "access", "grant", "bad name", "--collection", "x")
        assert code == 1 and "invalid_argument" in out, out
        code, out = await cograph(admin_env, "access", "grant", "dana")
        assert code == 2 and "--repo" in out, out

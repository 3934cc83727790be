"""The admin-key bootstrap and `cograph keys` against a live gateway."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from gateway.keys_store import ensure_admin_key
from tests.integration.gateway_fixtures import gateway_stack

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The lead wires keys_cmd into `cograph`; this drives the module's own parser the same way.
DRIVER = (
    "import argparse, sys\n"
    "from cograph_cli import keys_cmd\n"
    "parser = argparse.ArgumentParser(prog='cograph')\n"
    "keys_cmd.register(parser.add_subparsers(dest='command', required=True))\n"
    "args = parser.parse_args(sys.argv[1:])\n"
    "sys.exit(args.handler(args))\n"
)


async def cli(env: dict[str, str], *argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DRIVER,
        "keys",
        *argv,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode()


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
        assert await ensure_admin_key(stack.database_url, tmp_path / "elsewhere") is None
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

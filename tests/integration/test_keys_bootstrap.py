"""`cograph keys bootstrap`, the first admin key on Kubernetes: the real command (as the
gateway's initContainer runs it) against the real PostgreSQL, then a real gateway that must
accept the key as an admin. Idempotent, never prints the key, refuses a weak one.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.app import start_gateway
from tests.integration.support.stacks import gateway_settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _bootstrap(database_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COGRAPH_DATABASE_URL": database_url,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "cograph_cli", "keys", "bootstrap", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def _keys(database_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT id, name, admin, key_hash, revoked_at FROM api_keys ORDER BY created_at"
        )
        return rows
    finally:
        await conn.close()


async def test_bootstrap_creates_an_admin_key_the_gateway_accepts(
    fresh_db_url: str, tmp_path: Path
) -> None:
    key = "cg_" + secrets.token_hex(32)  # what `cg_$(openssl rand -hex 32)` makes
    key_file = tmp_path / "api-key"
    key_file.write_text(key + "\n")  # `kubectl create secret --from-file` keeps a newline

    first = _bootstrap(fresh_db_url, COGRAPH_ADMIN_KEY_FILE=str(key_file))
    assert first.returncode == 0, first.stderr
    assert "stored" in first.stdout
    assert key not in first.stdout + first.stderr and key[3:20] not in first.stdout
    (row,) = await _keys(fresh_db_url)
    assert row["admin"] and row["revoked_at"] is None
    assert key.encode() not in bytes(row["key_hash"])  # stored hashed

    again = _bootstrap(fresh_db_url, "--key-file", str(key_file))
    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout and key not in again.stdout
    assert [dict(r) for r in await _keys(fresh_db_url)] == [dict(row)]

    gateway = await start_gateway(gateway_settings(fresh_db_url, {}))
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            auth = {"Authorization": f"Bearer {key}"}
            listed = await client.get("/api/keys", headers=auth)  # admin only
            assert listed.status_code == 200, listed.text
            assert [k["admin"] for k in listed.json()["keys"]] == [True]
            made = await client.post("/api/keys", headers=auth, json={"name": "ci-bot"})
            assert made.status_code == 201, made.text
            wrong = await client.get("/api/keys", headers={"Authorization": f"Bearer {key}x"})
            assert wrong.status_code == 401
    finally:
        await gateway.stop()


async def test_a_revoked_bootstrap_key_stays_revoked(fresh_db_url: str) -> None:
    key = "cg_" + secrets.token_urlsafe(40)
    assert _bootstrap(fresh_db_url, COGRAPH_ADMIN_KEY=key).returncode == 0
    conn = await asyncpg.connect(fresh_db_url)
    try:
        await conn.execute("UPDATE api_keys SET revoked_at = now()")
    finally:
        await conn.close()
    rerun = _bootstrap(fresh_db_url, COGRAPH_ADMIN_KEY=key)
    assert rerun.returncode == 0 and "stays revoked" in rerun.stdout, rerun.stdout
    (row,) = await _keys(fresh_db_url)
    assert row["revoked_at"] is not None


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("cg_" + "a" * 31, "too short"),
        ("cg_short", "too short"),
        ("a" * 64, "must start with"),
        ("cg_" + "a" * 40 + " b", "may only hold"),
        ("cg_" + "a" * 300, "too long"),
    ],
)
async def test_weak_or_malformed_keys_are_refused(fresh_db_url: str, key: str, why: str) -> None:
    result = _bootstrap(fresh_db_url, COGRAPH_ADMIN_KEY=key)
    assert result.returncode == 2
    assert why in result.stderr, result.stderr
    assert key not in result.stdout + result.stderr
    conn = await asyncpg.connect(fresh_db_url)
    try:
        exists = await conn.fetchval("SELECT to_regclass('api_keys') IS NOT NULL")
        count = await conn.fetchval("SELECT count(*) FROM api_keys") if exists else 0
    finally:
        await conn.close()
    assert count == 0


async def test_no_key_provided(fresh_db_url: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "absent")
    # The Secret is optional in the manifests: without it the initContainer does nothing.
    skipped = _bootstrap(fresh_db_url, "--if-present", COGRAPH_ADMIN_KEY_FILE=missing)
    assert skipped.returncode == 0 and "nothing to do" in skipped.stdout
    failed = _bootstrap(fresh_db_url, COGRAPH_ADMIN_KEY_FILE=missing)
    assert failed.returncode == 2 and "no admin key" in failed.stderr

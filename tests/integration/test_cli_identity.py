"""The operator commands act as one identity, through the real `cograph` command.

A private repository that `cograph index` creates is what `cograph route` and
`cograph search` then find (all act as the local operator, an admin), and a note that
`cograph notes post` writes is authored by that same principal: voting on it is voting on
one's own note, while `--as` acts for someone else.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from cograph_cli.migrate_cmd import migrate_all
from cograph_cli.services import SERVICES
from retrieval.app import start_retrieval
from router.app import start_router
from router.settings import RouterSettings
from svckit.config import Env
from tests.integration.support.commons import commons_settings, running_commons
from tests.integration.support.retrieval import retrieval_settings
from tests.integration.support.search_corpus import make_vault_repo
from tests.internal_auth import with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/vault"


@pytest_asyncio.fixture(loop_scope="session")
async def operator_env(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> AsyncIterator[dict[str, str]]:
    """Retrieval, router and commons on one database; the environment `cograph` runs in."""
    await migrate_all(fresh_db_url, [spec for spec in SERVICES if spec.available()])
    retrieval = await start_retrieval(
        retrieval_settings(fresh_db_url, tmp_path / "data", embedder_address)
    )
    router = await start_router(
        RouterSettings.from_env(
            Env(with_secret({"ROUTER_LISTEN": "127.0.0.1:0", "ROUTER_DATABASE_URL": fresh_db_url}))
        )
    )
    try:
        async with running_commons(commons_settings(fresh_db_url, embedder_address)) as commons:
            environ = {k: v for k, v in os.environ.items() if k != "COGRAPH_PRINCIPAL"}
            yield with_secret(
                {
                    **environ,
                    "RETRIEVAL_ADDR": f"127.0.0.1:{retrieval.port}",
                    "ROUTER_ADDR": f"127.0.0.1:{router.port}",
                    "COMMONS_ADDR": f"127.0.0.1:{commons.app.port}",
                }
            )
    finally:
        await router.stop()
        await retrieval.stop()


async def _cograph(environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cograph_cli",
        *args,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_index_then_route_search_and_notes_as_one_operator(
    operator_env: dict[str, str], tmp_path: Path
) -> None:
    repo = make_vault_repo(tmp_path / "vault")
    code, out, err = await _cograph(
        operator_env, "index", str(repo), "--slug", SLUG, "--no-progress"
    )
    assert code == 0, err
    assert f"Indexed repository {SLUG}" in out

    # Private (no --public, no grant), yet the operator's route and search find it.
    code, out, err = await _cograph(operator_env, "route", "where is the vault unlocked", "--json")
    assert code == 0, err
    assert [r["slug"] for r in json.loads(out)["repositories"]] == [SLUG]
    code, out, err = await _cograph(operator_env, "search", "unlock_vault", "--json")
    assert code == 0, err
    found = json.loads(out)  # the compact form: one source, said once
    assert found["repo"] == SLUG and found["results"]

    # The note's author is the operator: its own vote is refused, another principal's counts.
    code, out, err = await _cograph(
        operator_env, "notes", "post", "The vault opens with a key", "See vault/core.py.", "--json"
    )
    assert code == 0, err
    post_id = json.loads(out)["id"]
    code, out, _ = await _cograph(operator_env, "notes", "vote", post_id, "up", "--json")
    assert (code, json.loads(out)["error"]) == (1, "own_post_vote")
    code, out, err = await _cograph(
        operator_env, "notes", "vote", post_id, "up", "--as", "reviewer", "--json"
    )
    assert (code, json.loads(out)["score"]) == (0, 1), err
    # COGRAPH_PRINCIPAL names the principal too. Every operator is an admin, so another
    # operator's delete is moderation: refused without a reason, which the log would keep.
    # The operator (the author) deletes its own note without one.
    other = {**operator_env, "COGRAPH_PRINCIPAL": "reviewer"}
    code, out, _ = await _cograph(other, "notes", "delete", post_id, "--json")
    refused = json.loads(out)
    assert (code, refused["error"]) == (1, "invalid_argument")
    assert "reason" in refused["detail"]
    code, out, err = await _cograph(operator_env, "notes", "delete", post_id, "--json")
    assert code == 0, err


async def test_repos_and_collections_list_show_and_delete(
    operator_env: dict[str, str], tmp_path: Path
) -> None:
    repo = make_vault_repo(tmp_path / "vault")
    docs = tmp_path / "handbook"
    docs.mkdir()
    (docs / "vault.md").write_text("# Vault\n\nHow the vault is unlocked.\n")
    code, _, err = await _cograph(operator_env, "index", str(repo), "--slug", SLUG, "--no-progress")
    assert code == 0, err
    code, _, err = await _cograph(
        operator_env, "collection", "add", "handbook", str(docs), "--no-progress"
    )
    assert code == 0, err

    # Found without RETRIEVAL_ADDR: through the port the stack wrote under its data dir.
    data = tmp_path / "stack"
    (data / "run").mkdir(parents=True)
    port = operator_env["RETRIEVAL_ADDR"].rsplit(":", 1)[1]
    (data / "run" / "retrieval.port").write_text(port)
    by_data_dir = {k: v for k, v in operator_env.items() if k != "RETRIEVAL_ADDR"}
    by_data_dir["COGRAPH_DATA_DIR"] = str(data)

    code, out, err = await _cograph(by_data_dir, "repos", "list", "--json")
    assert code == 0, err
    [listed] = json.loads(out)["repositories"]
    assert listed["slug"] == SLUG and listed["file_count"] > 0
    code, out, err = await _cograph(by_data_dir, "repos", "show", SLUG)
    assert code == 0 and f"slug: {SLUG}" in out, err
    code, out, err = await _cograph(by_data_dir, "collections", "list")
    assert code == 0 and out.startswith("handbook  1 documents"), (out, err)
    code, out, _ = await _cograph(by_data_dir, "collections", "show", "nothing", "--json")
    assert (code, json.loads(out)["error"]) == (1, "not_found")

    code, out, err = await _cograph(by_data_dir, "collections", "delete", "handbook", "--json")
    assert (code, json.loads(out)) == (0, {"deleted": "handbook"}), err
    code, out, _ = await _cograph(by_data_dir, "collections", "list", "--json")
    assert json.loads(out) == {"collections": []}
    code, out, _ = await _cograph(by_data_dir, "collections", "delete", "handbook", "--json")
    assert (code, json.loads(out)["error"]) == (1, "not_found")
    code, out, err = await _cograph(by_data_dir, "repos", "delete", SLUG)
    assert (code, out.strip()) == (0, f"deleted {SLUG}"), err
    code, out, _ = await _cograph(by_data_dir, "repos", "show", SLUG, "--json")
    assert (code, json.loads(out)["error"]) == (1, "not_found")
    code, _, err = await _cograph(by_data_dir, "collections", "delete", "", "--json")
    assert code == 2

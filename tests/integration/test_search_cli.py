"""`cograph search` and `cograph grep` end to end: a real process talking gRPC to the test's
retrieval server."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from tests.integration.support.retrieval import SearchEnv
from tests.integration.support.search_corpus import DEMO, VAULT, VAULT_CODE
from tests.internal_auth import with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _cograph(env: SearchEnv, *args: str, command: str = "search") -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cograph_cli",
        command,
        *args,
        env=with_secret({**os.environ, "RETRIEVAL_ADDR": f"127.0.0.1:{env.app.port}"}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_json_output_is_the_rest_body(search_env: SearchEnv) -> None:
    args = ("ParseConfig.load", "--repo", DEMO, "--graph", "--top-k", "3", "--json")
    code, out, err = await _cograph(search_env, *args)
    assert code == 0, err
    # By default the compact form REST and MCP answer with: a location per result, the
    # source said once, no per-stream scores.
    compact = json.loads(out)
    assert compact["query"] == "ParseConfig.load", compact
    assert compact.get("repo") == DEMO, compact
    assert compact["results"] and all(
        {"location", "kind", "snippet", "score", "confidence"} <= set(item) <= {
            "location", "qualified_name", "kind", "snippet", "truncated", "score", "confidence"
        }
        for item in compact["results"]
    )  # fmt: skip
    # A dotted suffix names the method: high, and so is the answer.
    assert compact["confidence"] == "high" and "no_good_answer" not in compact
    code, out, err = await _cograph(search_env, *args, "--verbose")
    assert code == 0, err
    body = json.loads(out)
    assert [r["qualified_name"] for r in body["results"]] == [
        r.get("qualified_name") for r in compact["results"]
    ]
    assert body["query"] == "ParseConfig.load"
    assert body["streams"] == {"vector": "ok", "lexical": "ok", "symbol": "ok", "reasons": {}}
    first = body["results"][0]
    assert set(first) >= {
        "id", "layer", "store", "repo", "path", "qualified_name", "kind", "start_line",
        "end_line", "commit", "snippet", "truncated", "score", "provenance", "vector_score",
        "bm25_score", "symbol_score", "rerank_score", "confidence",
    }  # fmt: skip
    assert body["no_good_answer"] is False
    assert first["layer"] in ("code", "ast_summary") and first["store"] == "code"
    assert first["rerank_score"] is None
    assert {p["stream"] for p in first["provenance"]} <= {"vector", "lexical", "symbol"}
    assert body["graph"]["edges"] and {"from", "to", "kind"} == set(body["graph"]["edges"][0])
    assert {e["kind"] for e in body["graph"]["edges"]} <= {
        "calls", "imports", "inherits", "implements", "contains"
    }  # fmt: skip


async def test_human_output_and_errors(search_env: SearchEnv) -> None:
    code, out, err = await _cograph(
        search_env, "billing retry", "--since", "2024-05-01", "--layer", "code"
    )
    assert code == 0, err
    assert "retry_failed_charge" in out and "vector ok" in out
    assert "server.go" not in out  # unchanged since January
    code, _, err = await _cograph(search_env, "x", "--top-k", "0")
    assert code == 2 and err.startswith("error: invalid_argument: top_k")
    code, _, err = await _cograph(search_env, "x", "--since", "yesterday")
    assert code == 2 and "ISO 8601" in err


async def test_explain_says_how_each_result_was_ranked(search_env: SearchEnv) -> None:
    code, out, err = await _cograph(search_env, "ParseConfig", "--repo", DEMO, "--explain")
    assert code == 0, err
    assert "identifier question; stages that changed the order:" in out
    assert "pin" in out.splitlines()[1]  # the exact name was pinned
    assert out.splitlines()[2] == "confidence high (the first result's)"
    assert "ranked: fusion #" in out
    code, out, err = await _cograph(
        search_env, "ParseConfig", "--repo", DEMO, "--explain", "--skip-stage", "pin", "--json"
    )
    assert code == 0, err
    runs = {run["name"]: run for run in json.loads(out)["explanation"]["stages"]}
    assert runs["pin"]["detail"] == "skipped by the request"
    code, _, err = await _cograph(search_env, "x", "--skip-stage", "fusion")
    assert code == 2 and "invalid choice" in err


async def test_grep_searches_every_repository_like_grep(search_env: SearchEnv) -> None:
    # The operator is an admin: without --repo, the private vault is searched too.
    code, out, err = await _cograph(search_env, "UNLOCK_VAULT(", "-i", "-C", "1", command="grep")
    assert code == 0, err
    vault = VAULT_CODE.splitlines()
    marks = {3: ":", 6: ":"}
    assert out.splitlines() == [
        f"{VAULT}:vault/core.py{marks.get(n, '-')}{n}{marks.get(n, '-')}{vault[n - 1]}"
        for n in range(2, 8)
    ]
    code, out, err = await _cograph(
        search_env, r"^def \w+_vault", "-E", "--limit", "1", "--json", command="grep"
    )
    assert code == 0, err
    body = json.loads(out)
    assert [(m["repo"], m["line"]) for m in body["matches"]] == [(VAULT, 1)] and body["truncated"]
    assert len(body["commits"][VAULT]) == 40
    code, _, err = await _cograph(search_env, "x", "-C", "11", command="grep")
    assert code == 2 and "context" in err, err

"""Notes shown beside code, end to end: the real commons and retrieval behind the gateway,
one tiny local repository indexed.

A note anchored to a function appears beside that function in search (REST, MCP through
the official client, gRPC), in a read of its lines and on a reference whose enclosing
function it is anchored to; `notes: false` leaves them out; a hidden note is shown only to
its author and admins; a key that cannot read the repository sees neither the code nor its
notes; a tight max_tokens still holds with notes counted; the commons' request limits hold
at their edges; and with the commons stopped, answers still come, without notes, saying
why."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
import pytest_asyncio

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api import limits
from cograph_api.search_forms import dumps
from cograph_api.tokens import default_counter
from commons.code_notes import NOTES_FOR_CODE_SQL
from tests.integration.support.commons import Caller
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.mcp_client import call
from tests.integration.support.mcp_client import http_client as mcp
from tests.integration.support.stacks import Stack, gateway_stack, wait_job
from tests.internal_auth import signed_channel

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/acme/payments"
CHARGES = '''"""Charging cards."""


def retry_failed_charge(charge_id: str) -> str:
    """Retries a charge the gateway declined."""
    return "retried " + charge_id


def refund_charge(charge_id: str) -> str:
    return "refunded " + charge_id
'''
WORKER = """from billing.charges import retry_failed_charge


def run_retries(ids: list[str]) -> list[str]:
    return [retry_failed_charge(i) for i in ids]
"""
RETRY_NOTE = "retry_failed_charge may run twice: keep it idempotent"
HIDDEN_NOTE = "retry_failed_charge secret workaround"
WORKER_NOTE = "run_retries is called from the nightly cron only"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("gw-code-notes")
    root = base / "src" / "payments"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "billing/charges.py", CHARGES)
    write(root, "billing/worker.py", WORKER)
    commit_all(root, "first", JAN)
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        base,
        services=("retrieval", "commons"),
        service_env={"COMMONS_ANCHOR_CHECK_INTERVAL_S": "3600"},
    ) as s:
        async with s.client(s.admin_key) as admin:
            started = await admin.post(
                "/api/repositories", json={"source": str(root), "slug": SLUG}
            )
            assert started.status_code == 202, started.text
            assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
            for principal in ("alice", "bob"):
                await s.key(principal)
                granted = await admin.post(
                    "/api/access/grant", json={"principal_id": principal, "repository": SLUG}
                )
                assert granted.status_code == 200, granted.text
        await s.key("stranger")
        yield s


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def note_ids(stack: Stack) -> dict[str, str]:
    """Alice's three notes (one hidden by an admin), their ids by title."""
    ids: dict[str, str] = {}
    async with stack.client(await stack.key("alice")) as alice:
        for title, anchor in (
            (RETRY_NOTE, {"repo": SLUG, "symbol": "retry_failed_charge"}),
            (HIDDEN_NOTE, {"repo": SLUG, "symbol": "retry_failed_charge"}),
            (WORKER_NOTE, {"repo": SLUG, "symbol": "run_retries"}),
        ):
            posted = await alice.post(
                "/v1/posts", json={"title": title, "body": "b", "anchors": [anchor]}
            )
            assert posted.status_code == 201, posted.text
            ids[title] = posted.json()["id"]
    async with stack.client(stack.admin_key) as admin:
        hidden = await admin.post(f"/v1/posts/{ids[HIDDEN_NOTE]}/hide", json={"reason": "test"})
        assert hidden.status_code == 200, hidden.text
    return ids


def _titles(notes: list[dict[str, Any]] | None) -> set[str]:
    return {n["title"] for n in notes or []}


def _result(answer: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in answer["results"] if (r.get("qualified_name") or "").endswith(name)]
    assert found, answer
    return found[0]


async def _search(stack: Stack, key: str, **extra: Any) -> dict[str, Any]:
    async with stack.client(key) as rest:
        reply = await rest.post(
            "/api/search", json={"query": "retry_failed_charge", "repo": SLUG, **extra}
        )
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


async def test_a_note_is_shown_beside_its_function_in_search(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    alice, bob = await stack.key("alice"), await stack.key("bob")
    compact = await _search(stack, bob)
    shown = _result(compact, "retry_failed_charge")["notes"]
    assert [(n["title"], n["status"]) for n in shown] == [(RETRY_NOTE, "fresh")]
    assert set(shown[0]) == {"id", "title", "score", "status"}
    assert shown[0]["id"] == note_ids[RETRY_NOTE] and shown[0]["score"] == 0
    assert "notes_reason" not in compact
    # Another function of the same file carries no note of this one.
    refund = [r for r in compact["results"] if "refund_charge" in (r.get("qualified_name") or "")]
    assert all(not r.get("notes") for r in refund)

    verbose = await _search(stack, bob, verbose=True)
    assert _titles(_result(verbose, "retry_failed_charge")["notes"]) == {RETRY_NOTE}
    assert verbose["notes_reason"] == ""
    # The hidden note exists for its author (and admins) only.
    assert _titles(_result(await _search(stack, alice), "retry_failed_charge")["notes"]) == {
        RETRY_NOTE,
        HIDDEN_NOTE,
    }
    admin_view = await _search(stack, stack.admin_key)
    assert HIDDEN_NOTE in _titles(_result(admin_view, "retry_failed_charge")["notes"])

    skipped = await _search(stack, bob, notes=False)
    assert all("notes" not in r for r in skipped["results"])
    bad = await _search_status(stack, bob, notes="yes")
    assert bad == 400


async def _search_status(stack: Stack, key: str, **extra: Any) -> int:
    async with stack.client(key) as rest:
        reply = await rest.post(
            "/api/search", json={"query": "retry_failed_charge", "repo": SLUG, **extra}
        )
    return reply.status_code


async def test_mcp_and_grpc_answers_carry_the_notes(stack: Stack, note_ids: dict[str, str]) -> None:
    bob = await stack.key("bob")
    async with mcp(stack, bob) as client:
        error, answer = await call(
            client, "cograph_search", {"query": "retry_failed_charge", "repo": SLUG}
        )
        assert not error, answer
        assert _titles(_result(answer, "retry_failed_charge")["notes"]) == {RETRY_NOTE}
        error, read = await call(
            client,
            "cograph_read",
            {"repo": SLUG, "path": "billing/charges.py", "start_line": 4, "end_line": 6},
        )
        assert not error, read
        assert _titles(read["notes"]) == {RETRY_NOTE}
        error, without = await call(
            client,
            "cograph_search",
            {"query": "retry_failed_charge", "repo": SLUG, "notes": False},
        )
        assert not error and all("notes" not in r for r in without["results"])

    assert stack.retrieval is not None
    async with signed_channel(f"127.0.0.1:{stack.retrieval.port}") as channel:
        retrieval = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        reply = await retrieval.Search(
            retrieval_pb2.SearchRequest(query="retry_failed_charge", repo=SLUG),
            metadata=Caller.md("bob"),
            timeout=30,
        )
    [hit] = [r for r in reply.results if r.qualified_name.endswith("retry_failed_charge")][:1]
    assert [(n.title, n.status) for n in hit.notes] == [(RETRY_NOTE, "fresh")]
    assert "notes" in reply.timings_ms


async def test_read_and_references_carry_the_notes_of_their_code(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    bob = await stack.key("bob")
    async with stack.client(bob) as rest:
        read = await rest.post(
            "/api/read",
            json={"repo": SLUG, "path": "billing/charges.py", "start_line": 5, "end_line": 5},
        )
        assert read.status_code == 200, read.text
        assert _titles(read.json()["notes"]) == {RETRY_NOTE}
        assert read.json()["notes_reason"] == ""
        # The refund's lines overlap no anchored code.
        other = await rest.post(
            "/api/read",
            json={"repo": SLUG, "path": "billing/charges.py", "start_line": 9, "end_line": 10},
        )
        assert other.json()["notes"] == []
        off = await rest.post(
            "/api/read", json={"repo": SLUG, "path": "billing/charges.py", "notes": False}
        )
        assert off.status_code == 200 and off.json()["notes"] == []

        refs = await rest.post(
            "/api/references", json={"repo": SLUG, "symbol": "retry_failed_charge"}
        )
        assert refs.status_code == 200, refs.text
        uses = [r for r in refs.json()["references"] if r["symbol"].endswith("run_retries")]
        assert uses, refs.json()
        # A reference carries the notes of the code holding it, not of the code it calls.
        assert all(_titles(r["notes"]) == {WORKER_NOTE} for r in uses)
        assert refs.json()["notes_reason"] == ""
        quiet = await rest.post(
            "/api/references",
            json={"repo": SLUG, "symbol": "retry_failed_charge", "notes": False},
        )
        assert all(r["notes"] == [] for r in quiet.json()["references"])


async def test_a_key_that_cannot_read_the_repository_sees_no_notes(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    stranger = await stack.key("stranger")
    async with stack.client(stranger) as rest:
        search = await rest.post("/api/search", json={"query": "retry_failed_charge"})
        assert search.status_code == 200, search.text
        assert RETRY_NOTE not in search.text and search.json()["results"] == []
        read = await rest.post(
            "/api/read", json={"repo": SLUG, "path": "billing/charges.py", "start_line": 5}
        )
        assert read.status_code == 404 and RETRY_NOTE not in read.text
        refs = await rest.post(
            "/api/references", json={"repo": SLUG, "symbol": "retry_failed_charge"}
        )
        assert refs.status_code == 404 and WORKER_NOTE not in refs.text


async def test_a_tight_budget_holds_with_notes_counted(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    bob = await stack.key("bob")
    counter = default_counter()
    with_notes = 0
    for budget in (limits.MAX_TOKENS_MIN, 120, 160, 200, 260, 400):
        answer = await _search(stack, bob, max_tokens=budget, snippet_chars=80)
        if not answer["results"]:
            continue
        # What was sent, counted: never over the budget, notes included.
        assert counter(dumps(answer)) <= budget, (budget, answer)
        assert answer["tokens"] <= budget
        with_notes += any(r.get("notes") for r in answer["results"])
    assert with_notes, "no budget kept a result with its notes"


async def test_notes_for_code_limits_hold_at_their_edges(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    assert stack.commons is not None
    target = commons_pb2.CodeTarget(
        repo=SLUG, path="billing/charges.py", qualified_name="", start_line=1, end_line=20
    )
    async with signed_channel(f"127.0.0.1:{stack.commons.port}") as channel:
        commons = commons_pb2_grpc.CommonsServiceStub(channel)

        async def ask(targets: list[commons_pb2.CodeTarget], per: int) -> Any:
            return await commons.NotesForCode(
                commons_pb2.NotesForCodeRequest(targets=targets, per_target=per),
                metadata=Caller.md("alice"),
                timeout=10,
            )

        full = await ask([target] * limits.NOTES_TARGETS_MAX, limits.NOTES_PER_TARGET_MAX)
        assert len(full.targets) == limits.NOTES_TARGETS_MAX
        # Alice's two notes on the function in these lines (one hidden, hers); the third
        # note's code is in another file.
        assert all({n.title for n in t.notes} == {RETRY_NOTE, HIDDEN_NOTE} for t in full.targets)
        one = await ask([target], limits.NOTES_PER_TARGET_MIN)
        assert len(one.targets[0].notes) == 1
        assert (await ask([], 0)).targets == []
        for targets, per, where in (
            ([target] * (limits.NOTES_TARGETS_MAX + 1), 0, "targets"),
            ([target], limits.NOTES_PER_TARGET_MAX + 1, "per_target"),
            ([target], -1, "per_target"),
            (
                [commons_pb2.CodeTarget(repo=SLUG, path="../etc", start_line=1, end_line=1)],
                0,
                "targets[0].path",
            ),
            (
                [commons_pb2.CodeTarget(repo=SLUG, path="a.py", start_line=3, end_line=2)],
                0,
                "targets[0].end_line",
            ),
            (
                [commons_pb2.CodeTarget(repo="", path="a.py", start_line=1, end_line=1)],
                0,
                "targets[0].repo",
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await ask(targets, per)
            assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert (refused.value.details() or "").startswith(where), refused.value.details()


async def test_the_lookup_is_one_statement_that_uses_the_current_place_indexes(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    """Thousands of anchors in other repositories: each target is found through the
    indexes of migration 0008, not by reading every anchor."""
    conn = await asyncpg.connect(stack.database_url)
    try:
        await conn.execute(
            "INSERT INTO post_anchors (post_id, repository_id, repo, qualified_name, path, "
            "start_line, end_line, kind, signature_hash, body_hash, commit_sha, generation, "
            "checked_commit, checked_generation) "
            "SELECT $1, 1000 + i % 40, 'example.com/bulk/r' || (i % 40), 'pkg.f' || i, "
            "'src/m' || (i % 300) || '.py', i % 50 + 1, i % 50 + 5, 'function', '', '', 'c', 1, "
            "'c', 1 FROM generate_series(1, 20000) AS i",
            uuid.UUID(note_ids[RETRY_NOTE]),
        )
        await conn.execute("ANALYZE post_anchors")
        targets = [
            (f"example.com/bulk/r{i}", f"src/m{i}.py", f"pkg.f{i}", 1, 30) for i in range(10)
        ]
        plan = "\n".join(
            row[0]
            for row in await conn.fetch(
                "EXPLAIN " + NOTES_FOR_CODE_SQL,
                *[list(column) for column in zip(*targets, strict=True)],
                3,
                0.15,
                "alice",
                False,
            )
        )
    finally:
        await conn.close()
    assert "post_anchors_current_name" in plan, plan
    assert "post_anchors_current_path" in plan, plan
    assert "Seq Scan on post_anchors" not in plan, plan


async def test_zz_with_the_commons_stopped_answers_come_without_notes(
    stack: Stack, note_ids: dict[str, str]
) -> None:
    """Last in the module: it stops the stack's commons."""
    assert stack.commons is not None
    bob = await stack.key("bob")
    await stack.commons.stop()
    for _ in range(4):  # the breaker opens after three failures in a row
        answer = await _search(stack, bob)
        assert answer["notes_reason"] == "commons_unavailable"
        assert _result(answer, "retry_failed_charge").get("notes") is None
        assert "streams" not in answer  # vector, lexical and symbol all answered
    started = time.perf_counter()
    async with stack.client(bob) as rest:
        read = await rest.post(
            "/api/read", json={"repo": SLUG, "path": "billing/charges.py", "start_line": 5}
        )
        refs = await rest.post(
            "/api/references", json={"repo": SLUG, "symbol": "retry_failed_charge"}
        )
    assert time.perf_counter() - started < 5
    assert read.status_code == 200 and read.json()["notes_reason"] == "commons_unavailable"
    assert refs.status_code == 200 and refs.json()["notes_reason"] == "commons_unavailable"
    assert refs.json()["references"]

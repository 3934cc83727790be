"""Notes anchored to code, end to end: the real commons and retrieval behind the gateway,
one tiny local repository indexed and re-indexed in place.

A note anchored to a function (by symbol and by lines) is `fresh` at the indexed commit;
changing the function's body and re-indexing flags it `body_changed`, its signature
`signature_changed`, moving it to another file `moved` (with the new path), deleting it
`orphaned` with the note kept; the author's confirmation and an admin's up-vote make it
`fresh` again. A key that cannot read the repository is refused an anchor there exactly
like a repository that does not exist, and never sees the anchor in a note or a listing."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api.anchors import COMMONS_PRINCIPAL
from cograph_cli import notes_cmd
from tests.integration.support.commons import Caller, wait_for
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.mcp_client import call
from tests.integration.support.mcp_client import http_client as mcp
from tests.integration.support.stacks import Stack, gateway_stack, wait_job
from tests.internal_auth import signed_channel, use_test_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/acme/billing"
CHARGES = '''"""Charging cards."""


def retry_failed_charge(charge_id: str) -> str:
    """Retries a charge the gateway declined."""
    return "retried " + charge_id


def refund(charge_id: str) -> str:
    return "refunded " + charge_id
'''
LEDGER = """def refund(entry: str) -> str:
    return "reversed " + entry
"""
BODY_CHANGED = CHARGES.replace('"retried " + charge_id', '"retried once " + charge_id')
SIGNATURE_CHANGED = BODY_CHANGED.replace(
    "retry_failed_charge(charge_id: str)", "retry_failed_charge(charge_id: str, attempts: int)"
)
_FUNCTION = SIGNATURE_CHANGED[
    SIGNATURE_CHANGED.index("def retry_failed_charge") : SIGNATURE_CHANGED.index("def refund")
]
MOVED = SIGNATURE_CHANGED.replace(_FUNCTION, "")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    base = tmp_path_factory.mktemp("gw-anchors")
    root = base / "src" / "billing"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "billing/charges.py", CHARGES)
    write(root, "billing/ledger.py", LEDGER)
    commit_all(root, "first", JAN)
    async with gateway_stack(
        pg_server_url,
        embedder_address,
        base,
        services=("retrieval", "commons"),
        # Checks run when a test asks (the loop's own pass would only repeat them).
        service_env={"COMMONS_ANCHOR_CHECK_INTERVAL_S": "3600"},
    ) as s:
        s.data_dir = root  # the source, for the tests that change it
        await _index(s)
        async with s.client(s.admin_key) as admin:
            await s.key("alice")
            granted = await admin.post(
                "/api/access/grant", json={"principal_id": "alice", "repository": SLUG}
            )
            assert granted.status_code == 200, granted.text
        await s.key("stranger")
        yield s


async def _index(stack: Stack) -> str:
    """Indexes the source as committed; the commit indexed."""
    async with stack.client(stack.admin_key) as admin:
        started = await admin.post(
            "/api/repositories", json={"source": str(stack.data_dir), "slug": SLUG}
        )
        assert started.status_code == 202, started.text
        assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
        return str((await admin.get(f"/api/repositories/{SLUG}")).json()["commit"])


async def _change(stack: Stack, path: str, content: str | None, message: str) -> str:
    """Commits a change to the source, re-indexes it and runs the anchors' check."""
    root = Path(stack.data_dir)
    if content is None:
        git(root, "rm", "-q", path)
    else:
        write(root, path, content)
    commit_all(root, message, JAN)
    commit = await _index(stack)
    assert stack.commons is not None and stack.commons.anchor_watch is not None
    await stack.commons.anchor_watch.check()
    return commit


async def _anchors(stack: Stack, key: str, post_id: str) -> list[dict[str, Any]]:
    async with stack.client(key) as rest:
        reply = await rest.get(f"/v1/posts/{post_id}")
    assert reply.status_code == 200, reply.text
    return list(reply.json()["anchors"])


async def _searchable(stack: Stack, key: str, *post_ids: str) -> None:
    async def embedded() -> bool:
        async with stack.client(key) as rest:
            for post_id in post_ids:
                if not (await rest.get(f"/v1/posts/{post_id}")).json()["searchable"]:
                    return False
        return True

    await wait_for(embedded, 60, f"{post_ids} searchable")


async def _search(stack: Stack, key: str, query: str, **scope: str) -> list[str]:
    """The ids a note search answers, best first."""
    async with stack.client(key) as rest:
        reply = await rest.get("/v1/search", params={"q": query, **scope})
    assert reply.status_code == 200, reply.text
    return [r["id"] for r in reply.json()["results"]]


TITLE = "retry_failed_charge may run twice"
BODY = "keep the gateway call idempotent"


async def test_an_anchor_follows_its_code_through_every_change(stack: Stack) -> None:
    alice = await stack.key("alice")
    async with stack.client(alice) as rest:
        # The same text anchored to code that never changes, posted first (older: it loses
        # ties while both are fresh).
        twin = await rest.post(
            "/v1/posts",
            json={
                "title": TITLE,
                "body": BODY,
                "anchors": [{"repo": SLUG, "symbol": "refund", "path": "billing/ledger.py"}],
            },
        )
        assert twin.status_code == 201, twin.text
        posted = await rest.post(
            "/v1/posts",
            json={
                "title": TITLE,
                "body": BODY,
                "anchors": [
                    {"repo": SLUG, "symbol": "retry_failed_charge"},
                    {"repo": SLUG, "path": "billing/charges.py", "start_line": 6, "end_line": 6},
                ],
            },
        )
        assert posted.status_code == 201, posted.text
        ambiguous = await rest.post(
            "/v1/posts",
            json={"title": "t", "body": "b", "anchors": [{"repo": SLUG, "symbol": "refund"}]},
        )
        assert ambiguous.status_code == 400, ambiguous.text
        assert "2 symbols match" in ambiguous.json()["detail"]
        # Narrowed to a file, the same name is one symbol.
        narrowed = await rest.post(
            "/v1/posts",
            json={
                "title": "ledger refunds reverse entries",
                "body": "b",
                "anchors": [{"repo": SLUG, "symbol": "refund", "path": "billing/ledger.py"}],
            },
        )
        assert narrowed.status_code == 201, narrowed.text
    note = posted.json()
    post_id = note["id"]
    async with stack.client(stack.admin_key) as admin:
        first_commit = (await admin.get(f"/api/repositories/{SLUG}")).json()["commit"]
    by_symbol, by_lines = note["anchors"]
    assert by_symbol["qualified_name"].endswith("retry_failed_charge")
    assert by_symbol["symbol"] == "retry_failed_charge" and by_lines["symbol"] == ""
    # The smallest symbol covering line 6 is the function itself.
    assert by_lines["qualified_name"] == by_symbol["qualified_name"]
    assert (by_symbol["path"], by_symbol["start_line"], by_symbol["end_line"]) == (
        "billing/charges.py",
        4,
        6,
    )
    for anchor in await _anchors(stack, alice, post_id):
        assert anchor["status"] == "fresh"
        assert anchor["commit"] == anchor["checked_commit"] == first_commit
        assert anchor["moved_to"] is None
    twin_id = twin.json()["id"]
    await _searchable(stack, alice, post_id, twin_id)
    # Equal text and votes, both fresh: the newer note first.
    phrase = f'"{TITLE}"'
    assert await _search(stack, alice, phrase) == [post_id, twin_id]
    # Scoped to where each note's code is.
    scoped = {"repo": SLUG, "path": "billing/charges.py"}
    assert await _search(stack, alice, phrase, **scoped) == [post_id]
    assert await _search(stack, alice, phrase, repo=SLUG, symbol="retry_failed_charge") == [post_id]

    commit = await _change(stack, "billing/charges.py", BODY_CHANGED, "body")
    anchors = await _anchors(stack, alice, post_id)
    assert [a["status"] for a in anchors] == ["body_changed", "body_changed"]
    # Every anchor of the newer note changed under it: it sinks below its fresh twin.
    assert await _search(stack, alice, phrase) == [twin_id, post_id]
    assert all(a["checked_commit"] == commit and a["commit"] == first_commit for a in anchors)
    async with stack.client(alice) as rest:
        review = await rest.get("/v1/anchors", params={"repo": SLUG})
        assert review.status_code == 200, review.text
        listed = review.json()["anchors"]
        assert {(n["post_id"], n["anchor"]["status"]) for n in listed} == {
            (post_id, "body_changed")
        }
        assert review.json()["truncated"] is False
        fresh = await rest.get("/v1/anchors", params={"repo": SLUG, "status": "fresh"})
        assert {n["post_id"] for n in fresh.json()["anchors"]} == {
            narrowed.json()["id"],
            twin_id,
        }
        confirmed = await rest.post(f"/v1/posts/{post_id}/anchors/{by_symbol['id']}/confirm")
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["status"] == "fresh"
        assert confirmed.json()["commit"] == confirmed.json()["checked_commit"] == commit
    async with mcp(stack, alice) as client:
        error, listed_mcp = await call(client, "commons_anchors", {"repo": SLUG})
    assert not error, listed_mcp
    assert [n["anchor"]["id"] for n in listed_mcp["anchors"]] == [by_lines["id"]]

    await _change(stack, "billing/charges.py", SIGNATURE_CHANGED, "signature")
    anchors = await _anchors(stack, alice, post_id)
    # The confirmed anchor compares with the confirmed body, the other with the first one:
    # both see another signature.
    assert [a["status"] for a in anchors] == ["signature_changed", "signature_changed"]
    # An up-vote from a key that reads both the note and the code confirms its anchors.
    async with stack.client(stack.admin_key) as admin:
        voted = await admin.post(f"/v1/posts/{post_id}/votes", json={"direction": "up"})
        assert voted.status_code == 200, voted.text
    assert [a["status"] for a in await _anchors(stack, alice, post_id)] == ["fresh", "fresh"]

    await _change(stack, "billing/charges.py", MOVED, "move out")
    await _change(stack, "billing/retries.py", _FUNCTION, "move in")
    anchors = await _anchors(stack, alice, post_id)
    assert [a["status"] for a in anchors] == ["moved", "moved"]
    moved_to = anchors[0]["moved_to"]
    assert moved_to["path"] == "billing/retries.py"
    assert moved_to["qualified_name"].endswith("retry_failed_charge")
    assert (moved_to["start_line"], moved_to["end_line"]) == (1, 3)
    # A scope follows the code where it moved; moved is no change of what the note says.
    assert await _search(stack, alice, phrase, repo=SLUG, path="billing/retries.py") == [post_id]
    assert await _search(stack, alice, phrase, **scoped) == []
    async with stack.client(alice) as rest:
        confirmed = await rest.post(f"/v1/posts/{post_id}/anchors/{anchors[0]['id']}/confirm")
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["path"] == "billing/retries.py"
        assert confirmed.json()["moved_to"] is None

    await _change(stack, "billing/retries.py", None, "delete")
    anchors = await _anchors(stack, alice, post_id)
    assert [a["status"] for a in anchors] == ["orphaned", "orphaned"]
    async with stack.client(alice) as rest:
        gone = await rest.post(f"/v1/posts/{post_id}/anchors/{anchors[0]['id']}/confirm")
        assert gone.status_code == 409, gone.text
        kept = await rest.get(f"/v1/posts/{post_id}")
        assert kept.json()["title"] == TITLE


async def test_an_unreadable_repository_is_refused_like_a_missing_one(stack: Stack) -> None:
    stranger, alice = await stack.key("stranger"), await stack.key("alice")
    missing = "example.com/acme/nothing"
    answers = []
    async with stack.client(stranger) as rest:
        for slug in (SLUG, missing):
            reply = await rest.post(
                "/v1/posts",
                json={"title": "t", "body": "b", "anchors": [{"repo": slug, "symbol": "refund"}]},
            )
            answers.append((reply.status_code, reply.json()["error"], reply.json()["detail"]))
        listed = [await rest.get("/v1/anchors", params={"repo": slug}) for slug in (SLUG, missing)]
    (status, error, detail), (status2, error2, detail2) = answers
    assert (status, error) == (status2, error2) == (404, "not_found")
    assert detail.replace(SLUG, "X") == detail2.replace(missing, "X")
    assert [r.status_code for r in listed] == [404, 404]
    assert listed[0].json()["detail"].replace(SLUG, "X") == listed[1].json()["detail"].replace(
        missing, "X"
    )

    async with stack.client(alice) as rest:
        posted = await rest.post(
            "/v1/posts",
            json={
                "title": "ledger refunds reverse entries, never delete them",
                "body": "b",
                "anchors": [
                    {"repo": SLUG, "path": "billing/ledger.py", "start_line": 1, "end_line": 2}
                ],
            },
        )
        assert posted.status_code == 201, posted.text
        post_id = posted.json()["id"]
        # Anchoring later: only the author (or an admin), with the same checks.
        async with stack.client(stranger) as other:
            refused = await other.post(
                f"/v1/posts/{post_id}/anchors",
                json={"anchors": [{"repo": SLUG, "symbol": "retry_failed_charge"}]},
            )
            assert refused.status_code == 403, refused.text
        beyond = await rest.post(
            f"/v1/posts/{post_id}/anchors",
            json={
                "anchors": [
                    {"repo": SLUG, "path": "billing/ledger.py", "start_line": 90, "end_line": 91}
                ]
            },
        )
        assert beyond.status_code == 400, beyond.text
        assert "anchors[0]" in beyond.json()["detail"]
    # The note is public to every key; its anchor is not.
    async with stack.client(stranger) as rest:
        seen = await rest.get(f"/v1/posts/{post_id}")
    assert seen.status_code == 200, seen.text
    assert seen.json()["anchors"] == []
    assert "billing/ledger.py" not in seen.text
    assert len(await _anchors(stack, alice, post_id)) == 1


async def test_only_the_commons_rechecks_and_only_admins_ask_it_to(
    stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RecheckAnchors compares anchors of every repository: no principal but the commons'
    own may call it, an admin included; the check the commons runs is an admin's to ask
    for (CheckAnchors, `cograph notes anchors --check`)."""
    assert stack.retrieval is not None and stack.commons is not None
    async with signed_channel(f"127.0.0.1:{stack.retrieval.port}") as channel:
        retrieval = retrieval_pb2_grpc.RetrievalServiceStub(channel)
        for principal, admin in (("admin", True), ("alice", False), (COMMONS_PRINCIPAL, True)):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await retrieval.RecheckAnchors(
                    retrieval_pb2.RecheckAnchorsRequest(repository_ids=[1]),
                    metadata=Caller.md(principal, admin=admin),
                    timeout=10,
                )
            assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    async with signed_channel(f"127.0.0.1:{stack.commons.port}") as channel:
        commons = commons_pb2_grpc.CommonsServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await commons.CheckAnchors(
                commons_pb2.CheckAnchorsRequest(), metadata=Caller.md("alice"), timeout=10
            )
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED

    monkeypatch.setenv("COMMONS_ADDR", f"127.0.0.1:{stack.commons.port}")
    use_test_secret(monkeypatch)
    parser = argparse.ArgumentParser(prog="cograph")
    notes_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["notes", "anchors", "--repo", SLUG, "--check", "--json"])
    code: int = await asyncio.to_thread(args.handler, args)
    body = json.loads(capsys.readouterr().out)
    assert code == 0, body
    assert body["check"]["repositories"] == 1
    assert isinstance(body["anchors"], list) and body["truncated"] is False


async def test_a_scoped_search_keeps_the_notes_anchored_there(stack: Stack) -> None:
    """repo, path prefix (a file or a directory, not a name's prefix) and symbol (qualified
    or a dotted suffix); an unreadable repository answers like a missing one; a malformed
    scope is 400 saying what was wrong."""
    alice, stranger = await stack.key("alice"), await stack.key("stranger")
    phrase = '"zebra refunds"'
    notes = {}
    async with stack.client(alice) as rest:
        for name, anchors in (
            ("ledger", [{"repo": SLUG, "symbol": "refund", "path": "billing/ledger.py"}]),
            ("charges", [{"repo": SLUG, "symbol": "refund", "path": "billing/charges.py"}]),
            ("none", []),
        ):
            posted = await rest.post(
                "/v1/posts",
                json={"title": f"zebra refunds: {name}", "body": "b", "anchors": anchors},
            )
            assert posted.status_code == 201, posted.text
            notes[name] = posted.json()["id"]
    ledger, charges, none = notes["ledger"], notes["charges"], notes["none"]
    await _searchable(stack, alice, ledger, charges, none)
    ledger_name = (await _anchors(stack, alice, ledger))[0]["qualified_name"]

    assert set(await _search(stack, alice, phrase)) == {ledger, charges, none}
    for scope, expected in (
        ({}, {ledger, charges}),
        ({"path": "billing/ledger.py"}, {ledger}),
        ({"path": "./billing/"}, {ledger, charges}),
        ({"path": "bill"}, set()),
        ({"path": "billing/ledger"}, set()),
        ({"symbol": "refund"}, {ledger, charges}),
        ({"symbol": ledger_name}, {ledger}),
        ({"symbol": ledger_name.split(".", 1)[1]}, {ledger}),
        ({"symbol": "efund"}, set()),
        ({"path": "billing/charges.py", "symbol": "refund"}, {charges}),
    ):
        found = await _search(stack, alice, phrase, repo=SLUG.upper(), **scope)
        assert set(found) == expected, scope

    # A repository the key cannot read: the answer of one that does not exist.
    missing = "example.com/acme/nothing"
    async with stack.client(stranger) as rest:
        refused = [
            await rest.get("/v1/search", params={"q": phrase, "repo": slug})
            for slug in (SLUG, missing)
        ]
        bad = [
            await rest.get("/v1/search", params={"q": phrase, **scope})
            for scope in (
                {"path": "billing"},
                {"symbol": "refund"},
                {"repo": SLUG, "path": "../etc/passwd"},
                {"repo": SLUG, "path": "/etc/passwd"},
                {"repo": SLUG, "symbol": "refund."},
                {"repo": "x" * 301},
                {"repo": SLUG, "path": "a" * 1025},
            )
        ]
    assert [r.status_code for r in refused] == [404, 404]
    assert refused[0].json()["error"] == refused[1].json()["error"] == "not_found"
    assert refused[0].json()["detail"].replace(SLUG, "X") == refused[1].json()["detail"].replace(
        missing, "X"
    )
    assert [r.status_code for r in bad] == [400] * 7, [r.text for r in bad]
    details = [r.json()["detail"] for r in bad]
    assert details[0].startswith("repo: required") and details[1].startswith("repo: required")
    assert details[2].startswith("path: ") and details[3].startswith("path: ")
    assert details[4].startswith("symbol: ")
    # An admin reads every repository.
    assert set(await _search(stack, stack.admin_key, phrase, repo=SLUG)) == {ledger, charges}

    async with mcp(stack, alice) as client:
        error, found = await call(
            client, "commons_search", {"query": phrase, "repo": SLUG, "path": "billing/ledger.py"}
        )
        assert not error, found
        assert [r["id"] for r in found["results"]] == [ledger]
        error, _ = await call(client, "commons_search", {"query": phrase, "path": "billing"})
        assert error
    async with mcp(stack, stranger) as client:
        error, _ = await call(client, "commons_search", {"query": phrase, "repo": SLUG})
        assert error


async def test_mcp_tools_anchor_and_confirm_a_note(stack: Stack) -> None:
    alice, stranger = await stack.key("alice"), await stack.key("stranger")
    async with mcp(stack, alice) as client:
        error, note = await call(
            client,
            "commons_post",
            {
                "title": "ledger refunds are reversals",
                "body": "never delete a ledger entry",
                "anchors": [
                    {"repo": SLUG, "path": "billing/ledger.py", "start_line": 1, "end_line": 1}
                ],
            },
        )
        assert not error, note
        assert [a["path"] for a in note["anchors"]] == ["billing/ledger.py"]
        error, anchored = await call(
            client,
            "commons_anchor",
            {
                "post_id": note["id"],
                "anchors": [{"repo": SLUG, "symbol": "refund", "path": "billing/charges.py"}],
            },
        )
        assert not error, anchored
        assert [a["path"] for a in anchored["anchors"]] == [
            "billing/ledger.py",
            "billing/charges.py",
        ]
        first = anchored["anchors"][0]
        error, confirmed = await call(
            client, "commons_confirm_anchor", {"post_id": note["id"], "anchor_id": first["id"]}
        )
        assert not error, confirmed
        assert (confirmed["id"], confirmed["status"]) == (first["id"], "fresh")
        error, unresolved = await call(
            client,
            "commons_anchor",
            {"post_id": note["id"], "anchors": [{"repo": SLUG, "symbol": "no_such_function"}]},
        )
        assert error and "anchors[0]" in json.dumps(unresolved)
    async with mcp(stack, stranger) as client:
        # Not the author: refused, and nothing about the note's code is told.
        error, refused = await call(
            client,
            "commons_anchor",
            {
                "post_id": note["id"],
                "anchors": [{"repo": SLUG, "symbol": "refund", "path": "billing/ledger.py"}],
            },
        )
        assert error
        error, refused = await call(
            client, "commons_confirm_anchor", {"post_id": note["id"], "anchor_id": first["id"]}
        )
        assert error
        assert "billing" not in json.dumps(refused)
    assert len(await _anchors(stack, alice, note["id"])) == 2


async def test_cli_posts_anchors_confirms_and_searches_in_scope(
    stack: Stack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stack.commons is not None
    monkeypatch.setenv("COMMONS_ADDR", f"127.0.0.1:{stack.commons.port}")
    use_test_secret(monkeypatch)
    parser = argparse.ArgumentParser(prog="cograph")
    notes_cmd.register(parser.add_subparsers(dest="command", required=True))

    async def run(*argv: str) -> tuple[int, Any, str]:
        args = parser.parse_args(["notes", *argv])
        code: int = await asyncio.to_thread(args.handler, args)
        out = capsys.readouterr()
        body = json.loads(out.out) if "--json" in argv and out.out.strip() else None
        return code, body, out.err

    code, note, _ = await run(
        "post",
        "okapi: ledger entries are reversed",
        "b",
        "--anchor",
        f"{SLUG}:billing/ledger.py:1-2",
        "--json",
    )
    assert code == 0, note
    assert [a["path"] for a in note["anchors"]] == ["billing/ledger.py"]
    # The service's refusal, shown with its code: the symbol resolves to nothing.
    code, _, err = await run("anchor", note["id"], "--anchor", f"{SLUG}:no_such_function")
    assert code == 1 and err.startswith("error: invalid_argument: anchors[0]"), err
    code, body, _ = await run("anchor", note["id"], "--anchor", f"{SLUG}:refund", "--json")
    assert code == 1 and body["error"] == "invalid_argument" and "2 symbols" in body["detail"]
    code, post, _ = await run(
        "anchor", note["id"], "--anchor", f"{SLUG}:billing.charges.refund", "--json"
    )
    assert code == 0, post
    assert len(post["anchors"]) == 2
    code, anchor, _ = await run("confirm", note["id"], post["anchors"][0]["id"], "--json")
    assert code == 0 and anchor["status"] == "fresh", anchor
    await _searchable(stack, stack.admin_key, note["id"])
    code, found, _ = await run(
        "search", '"okapi"', "--repo", SLUG, "--path", "billing/ledger.py", "--json"
    )
    assert code == 0 and [r["id"] for r in found["results"]] == [note["id"]]
    code, found, _ = await run("search", '"okapi"', "--repo", SLUG, "--path", "docs", "--json")
    assert code == 0 and found["results"] == []
    code, body, _ = await run("search", '"okapi"', "--path", "billing", "--json")
    assert code == 1 and body["error"] == "invalid_argument" and body["detail"].startswith("repo:")

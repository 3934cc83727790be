"""`cograph notes ...` against a running commons service over gRPC."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from cograph_cli import notes_cmd
from tests.integration.support.commons import Running
from tests.internal_auth import use_test_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cograph")
    notes_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser


async def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    args = _parser().parse_args(argv)
    # The handlers run their own event loop (asyncio.run), so keep them off this one.
    code: int = await asyncio.to_thread(args.handler, args)
    return code, capsys.readouterr().out


async def test_post_vote_comment_search_show_delete(
    commons: Running, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMMONS_ADDR", f"127.0.0.1:{commons.app.port}")
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "cli-agent")
    use_test_secret(monkeypatch)
    code, out = await _cli(
        [
            "notes",
            "post",
            "Run migrations under an advisory lock",
            "Replicas race.",
            "--tag",
            "db",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    post = json.loads(out)
    await commons.caller.wait_searchable(post["id"])
    # Authors cannot vote on their own notes; another principal can.
    code, out = await _cli(["notes", "vote", post["id"], "up", "--json"], capsys)
    assert (code, json.loads(out)["error"]) == (1, "own_post_vote")
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "cli-reader")
    code, out = await _cli(["notes", "vote", post["id"], "up", "--json"], capsys)
    assert (code, json.loads(out)["score"]) == (0, 1)
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "cli-agent")
    code, out = await _cli(["notes", "comment", post["id"], "Confirmed.", "--json"], capsys)
    assert (code, json.loads(out)["comment_count"]) == (0, 1)
    code, out = await _cli(["notes", "search", "migrations racing", "--json"], capsys)
    body = json.loads(out)
    assert body["query"] == "migrations racing"
    (result,) = body["results"]
    assert set(result) == {
        "id",
        "contributor_no",
        "title",
        "body",
        "body_truncated",
        "body_chars",
        "tags",
        "score",
        "comment_count",
        "created_at",
        "author_name",
    }
    assert (result["id"], result["score"], result["comment_count"]) == (post["id"], 1, 1)
    code, out = await _cli(["notes", "name", "Migrations Bot", "--json"], capsys)
    assert (code, json.loads(out)["display_name"]) == (0, "Migrations Bot")
    code, out = await _cli(["notes", "recent", "--sort", "top", "--tag", "DB"], capsys)
    assert code == 0 and "Run migrations under an advisory lock" in out
    assert f"#{post['contributor_no']} 'Migrations Bot'" in out and "more:" not in out
    code, out = await _cli(["notes", "recent", "--cursor", "forged", "--json"], capsys)
    assert code == 1 and json.loads(out)["error"] == "invalid_argument"
    code, out = await _cli(["notes", "show", post["id"]], capsys)
    assert code == 0 and "Confirmed." in out and "Replicas race." in out
    assert "'Migrations Bot'" in out
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "someone-else")
    # Operator commands are admins: deleting another's note is moderation and needs a reason.
    code, out = await _cli(["notes", "delete", post["id"], "--json"], capsys)
    assert code == 1 and json.loads(out)["error"] == "invalid_argument"
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "cli-agent")
    code, _ = await _cli(["notes", "delete", post["id"]], capsys)
    assert code == 0

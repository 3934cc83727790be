"""One style for every command: `--json` wherever a command prints data, errors as
`error: <code>: <detail>` (or `{"error", "detail"}` with --json), command lines that do not
parse named in words, and progress bars only on a terminal."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_cli import index_cmd
from cograph_cli.main import build_parser, main

# Commands that print no data of their own: `up` runs the stack in the foreground, `mcp`
# speaks MCP on stdout, `reembed` reports progress and a summary while it works for
# minutes, `keys bootstrap` runs in a pod's start-up and says one line.
NO_JSON = {"cograph up", "cograph mcp", "cograph reembed", "cograph keys bootstrap"}


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [parser]
    return [leaf for group in groups for sub in group.choices.values() for leaf in _leaves(sub)]


def test_every_command_that_prints_data_takes_json() -> None:
    leaves = {leaf.prog: leaf for leaf in _leaves(build_parser())}
    assert len(leaves) > 30 and set(leaves) >= NO_JSON
    missing = [
        prog
        for prog, leaf in leaves.items()
        if prog not in NO_JSON and not any("--json" in a.option_strings for a in leaf._actions)
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "usage", "expected"),
    [
        (["bogus"], "cograph [-h]", "unknown command 'bogus' for cograph: one of up, migrate, "),
        (
            ["notes", "bogus"],
            "cograph notes [-h]",
            "unknown command 'bogus' for cograph notes: one of post, search",
        ),
        (
            ["keys"],
            "cograph keys [-h]",
            "cograph keys needs a command: one of create, list, revoke, bootstrap",
        ),
        (["repos"], "cograph repos [-h]", "cograph repos needs a command: one of list, show"),
        (["search"], "cograph search [-h]", "the following arguments are required: query"),
    ],
)
def test_a_command_line_that_does_not_parse_is_a_usage_error_in_words(
    argv: list[str], usage: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith(f"usage: {usage}")  # the command that was meant
    message = err.splitlines()[-1]
    assert message.startswith(f"error: usage: {expected}")
    assert "_command" not in err and "argument action" not in err  # parser internals


def test_a_usage_error_with_json_is_json_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["repos", "bogus", "--json"])
    out, err = capsys.readouterr()
    assert err == ""
    body = json.loads(out)
    assert body["error"] == "usage" and "one of list, show, delete, refs" in body["detail"]


def test_a_missing_setting_is_an_error_in_the_same_style(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COGRAPH_DATABASE_URL", raising=False)
    assert main(["migrate", "--json"]) == 2
    body = json.loads(capsys.readouterr().out)
    assert body["error"] == "configuration" and "COGRAPH_DATABASE_URL" in body["detail"]
    assert main(["migrate"]) == 2
    assert capsys.readouterr().err.startswith("error: configuration: COGRAPH_DATABASE_URL")


def test_credentials_print_json_and_errors_in_the_one_style(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token.txt"
    token.write_text("t0ken-value\n")
    folder = str(tmp_path / "creds")
    add = ["credentials", "--dir", folder, "add", "acme", "https://github.com/acme/"]
    add += ["--username", "x-access-token"]
    assert main([*add, "--token-file", str(token), "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["name"] == "acme" and added["kind"] == "token" and "t0ken" not in str(added)
    assert main(["credentials", "--dir", folder, "list", "--json"]) == 0
    assert [e["name"] for e in json.loads(capsys.readouterr().out)] == ["acme"]

    assert main([*add, "--token-file", str(token)]) == 2  # exists, no --replace
    assert capsys.readouterr().err.startswith("error: invalid_argument: credential 'acme'")
    assert main([*add, "--token-file", str(token), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "invalid_argument"

    assert main(["credentials", "--dir", folder, "remove", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "acme", "removed": True}
    assert main(["credentials", "--dir", folder, "remove", "acme", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "not_found"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    args = SimpleNamespace(no_progress=False, json=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a file or a pipe
    assert index_cmd._progress(args) is False  # type: ignore[arg-type]
    monkeypatch.setattr("sys.stderr", _Terminal())
    assert index_cmd._progress(args) is True  # type: ignore[arg-type]
    for off in ({"no_progress": True}, {"json": True}):
        assert index_cmd._progress(SimpleNamespace(**{**vars(args), **off})) is False  # type: ignore[arg-type]


class _Jobs:
    """GetJob answering a job that advances once, then succeeds."""

    def __init__(self) -> None:
        self.calls = 0

    async def GetJob(self, request: pb.GetJobRequest, **_: Any) -> pb.GetJobResponse:
        self.calls += 1
        state = pb.JOB_STATE_SUCCEEDED if self.calls > 1 else pb.JOB_STATE_RUNNING
        progress = pb.JobProgress(files_done=self.calls, files_total=2, nodes=5 * self.calls)
        return pb.GetJobResponse(job=pb.Job(id=request.job_id, state=state, progress=progress))


def test_a_job_followed_without_a_terminal_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_cmd, "_POLL_S", 0.0)
    monkeypatch.setattr(index_cmd, "_metadata", lambda: ())
    quiet = io.StringIO()
    job = asyncio.run(index_cmd.follow_job(_Jobs(), "j", False, quiet))  # type: ignore[arg-type]
    assert job.state == pb.JOB_STATE_SUCCEEDED and quiet.getvalue() == ""
    drawn = _Terminal()
    asyncio.run(index_cmd.follow_job(_Jobs(), "j", True, drawn))  # type: ignore[arg-type]
    assert "files" in drawn.getvalue() and "\r" in drawn.getvalue()  # the bars a terminal gets

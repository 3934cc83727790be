"""`cograph grep` argument handling, its text layout (grep's) and its JSON (the REST body)."""

from __future__ import annotations

import argparse

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph_cli import grep_cmd
from cograph_cli.main import COMMANDS


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    grep_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["grep", *argv])


def test_request_from_arguments() -> None:
    assert COMMANDS["grep"] == grep_cmd.__name__
    request = grep_cmd.build_request(
        parse(
            r"^def \w+", "-E", "-i", "-C", "3", "--repo", "a/b/c", "--glob", "*.py", "--limit", "5"
        )
    )
    assert (request.pattern, request.repo, request.path_glob) == (r"^def \w+", "a/b/c", "*.py")
    assert request.regex and request.case_insensitive and request.context == 3
    assert request.limit == 5
    # Without --repo: every repository; without --limit: the service's default.
    plain = grep_cmd.build_request(parse("TODO", "--ignore-case", "--context", "1"))
    assert plain.repo == "" and not plain.regex and not plain.HasField("limit")
    assert plain.case_insensitive and plain.context == 1


def test_a_context_that_is_not_a_number_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        parse("x", "-C", "many")


def _match(repo: str, path: str, line: int, before: int = 0, after: int = 0) -> pb.GrepMatch:
    return pb.GrepMatch(
        repo=repo,
        path=path,
        line=line,
        text=f"match {line}\r",
        before=[f"line {n}" for n in range(line - before, line)],
        after=[f"line {n}" for n in range(line + 1, line + 1 + after)],
    )


def test_text_output_reads_like_grep() -> None:
    reply = pb.GrepResponse(
        matches=[
            _match("h/o/a", "x.py", 1, 0, 1),
            _match("h/o/a", "x.py", 2, 1, 1),  # overlaps the first: each line once
            _match("h/o/a", "x.py", 9, 1, 0),  # a gap before it
            _match("h/o/b", "x.py", 1, 0, 1),  # another repository
        ],
        truncated=True,
    )
    assert grep_cmd.render(reply).splitlines() == [
        "h/o/a:x.py:1:match 1",
        "h/o/a:x.py:2:match 2",
        "h/o/a:x.py-3-line 3",
        "--",
        "h/o/a:x.py-8-line 8",
        "h/o/a:x.py:9:match 9",
        "--",
        "h/o/b:x.py:1:match 1",
        "h/o/b:x.py-2-line 2",
        "(more lines matched: raise --limit, or narrow the pattern or --glob)",
    ]
    # Without context, no separators.
    plain = pb.GrepResponse(matches=[_match("h/o/a", "x.py", 1), _match("h/o/a", "y.py", 5)])
    assert grep_cmd.render(plain).splitlines() == ["h/o/a:x.py:1:match 1", "h/o/a:y.py:5:match 5"]
    assert grep_cmd.render(pb.GrepResponse()) == "(no match)"


def test_json_is_the_rest_body() -> None:
    reply = pb.GrepResponse(matches=[_match("h/o/a", "x.py", 2, 1, 0)], commits={"h/o/a": "c" * 40})
    assert grep_cmd.response_body(reply) == {
        "matches": [
            {
                "path": "x.py",
                "line": 2,
                "text": "match 2\r",
                "repo": "h/o/a",
                "before": ["line 1"],
                "after": [],
            }
        ],
        "truncated": False,
        "commit": "",
        "commits": {"h/o/a": "c" * 40},
    }

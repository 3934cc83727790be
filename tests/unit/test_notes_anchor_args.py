"""`cograph notes post|anchor --anchor`: REPO:SYMBOL and REPO:PATH:START-END, parsed and
checked before any call, with errors naming the option and what was wrong."""

from __future__ import annotations

import argparse
import json

import pytest

from cograph_api import limits as L
from cograph_api.anchors import Target
from cograph_cli import notes_cmd
from cograph_cli.anchor_args import anchor_targets, parse_anchor

REPO = "github.com/acme/billing"


def test_a_symbol_and_a_line_range() -> None:
    assert parse_anchor(f"{REPO}:billing.charges.refund") == Target(
        REPO, "billing.charges.refund", "", 0, 0
    )
    assert parse_anchor(" GitHub.com/Acme/Billing:billing/charges.py:4-6 ") == Target(
        REPO, "", "billing/charges.py", 4, 6
    )
    # A symbol may hold '::' (the slug ends at the first ':'), and a name that merely ends
    # in digits is not a range.
    assert parse_anchor(f"{REPO}:crate::ledger::refund").symbol == "crate::ledger::refund"
    assert parse_anchor(f"{REPO}:v2").symbol == "v2"
    assert parse_anchor(f"{REPO}:a.py:{L.ANCHOR_LINE_MAX}-{L.ANCHOR_LINE_MAX}").end_line == (
        L.ANCHOR_LINE_MAX
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("refund", "expected REPO:SYMBOL or REPO:PATH:START-END"),
        (f"{REPO}:", "expected"),
        (":refund", "expected"),
        (f"{REPO}:a.py:0-3", "start_line: must be between 1"),
        (f"{REPO}:a.py:9-3", "end_line: must be between start_line"),
        (f"{REPO}:a.py:1-{L.ANCHOR_LINES_MAX + 1}", f"at most {L.ANCHOR_LINES_MAX} lines"),
        (f"{REPO}:../etc/passwd:1-2", "path: must not contain"),
        (f"{REPO}:/etc/passwd:1-2", "path: must be relative"),
        (f"{REPO}:{'x' * (L.SYMBOL_MAX_CHARS + 1)}", f"at most {L.SYMBOL_MAX_CHARS} characters"),
        (f"{REPO}:f\x07", "control characters"),
    ],
)
def test_a_malformed_anchor_says_what_is_wrong(value: str, says: str) -> None:
    with pytest.raises(ValueError, match="--anchor") as refused:
        parse_anchor(value)
    assert says in str(refused.value)


def test_the_count_is_bounded_and_anchor_needs_one() -> None:
    most = [f"{REPO}:f{i}" for i in range(L.ANCHORS_PER_POST_MAX)]
    assert len(anchor_targets(most)) == L.ANCHORS_PER_POST_MAX
    with pytest.raises(ValueError, match=f"at most {L.ANCHORS_PER_POST_MAX} anchors"):
        anchor_targets([*most, f"{REPO}:g"])
    assert anchor_targets([]) == []
    with pytest.raises(ValueError, match="at least one --anchor"):
        anchor_targets([], required=True)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cograph")
    notes_cmd.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_a_bad_anchor_is_a_usage_error_before_any_call(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No commons to reach: a call would fail with another code.
    monkeypatch.setenv("COMMONS_ADDR", "127.0.0.1:1")
    args = _parse(["notes", "post", "t", "b", "--anchor", f"{REPO}:a.py:5-1", "--json"])
    assert args.handler(args) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "usage"
    args = _parse(["notes", "anchor", "some-id", "--json"])
    assert args.handler(args) == 2
    assert "at least one --anchor" in json.loads(capsys.readouterr().out)["detail"]
    args = _parse(["notes", "confirm", "p", "a"])
    assert (args.post_id, args.anchor_id) == ("p", "a")
    args = _parse(["notes", "search", "q", "--repo", REPO, "--path", "billing", "--symbol", "f"])
    assert (args.repo, args.path, args.symbol) == (REPO, "billing", "f")

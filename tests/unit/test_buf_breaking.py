"""scripts/buf_breaking.sh, which `make lint` runs: it fails on a breaking proto change
against the previous commit or the merge-base with main, and skips where there is no
earlier commit. Each case runs the script in a throwaway git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / ".venv" / "bin" / "buf"
PROTO = """syntax = "proto3";

package cograph.demo.v1;

message Note {
  string id = 1;
  string title = 2;
}
"""

pytestmark = pytest.mark.skipif(not BUF.exists(), reason="buf is installed by `make lint`")


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "buf_breaking.sh", repo / "scripts")
    shutil.copy(ROOT / "buf.yaml", repo)
    proto = repo / "protos" / "cograph" / "demo" / "v1" / "demo.proto"
    proto.parent.mkdir(parents=True)
    proto.write_text(PROTO)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BUF_BREAKING_AGAINST"}
    return subprocess.run(
        ["scripts/buf_breaking.sh"],
        check=False,
        cwd=repo,
        env={**env, "BUF": str(BUF)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _edit(repo: Path, old: str, new: str) -> None:
    proto = repo / "protos" / "cograph" / "demo" / "v1" / "demo.proto"
    proto.write_text(proto.read_text().replace(old, new))


def test_the_first_commit_has_nothing_to_compare_with(tmp_path: Path) -> None:
    done = _check(_repo(tmp_path))
    assert done.returncode == 0 and "skipped" in done.stdout


def test_a_renamed_field_fails_against_the_previous_commit(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _edit(repo, "string title = 2;", "string title = 2;\n  string body = 3;")
    _git(repo, "commit", "-q", "-am", "a field added")
    assert _check(repo).returncode == 0  # adding is compatible
    _edit(repo, "string title = 2;", "string heading = 2;")
    done = _check(repo)
    assert done.returncode != 0
    assert 'changed name from "title" to "heading"' in done.stdout + done.stderr


def test_a_branch_is_compared_with_its_merge_base(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _git(repo, "checkout", "-q", "-b", "feature")
    _edit(repo, "string id = 1;", "string key = 1;")
    _git(repo, "commit", "-q", "-am", "break")
    (repo / "notes.txt").write_text("later commit on the branch\n")
    _git(repo, "add", "notes.txt")
    _git(repo, "commit", "-q", "-m", "unrelated")
    # HEAD~1 already has the break; the merge-base with main does not.
    fork = _git(repo, "merge-base", "HEAD", "main").strip()
    done = _check(repo)
    assert f".git#ref={fork}" in done.stdout
    assert done.returncode != 0

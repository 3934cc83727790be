"""Slugs, source kinds and skip rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from retrieval.indexing.snapshots import open_snapshot
from retrieval.indexing.sources import (
    Checkout,
    SkipRules,
    derive_slug,
    is_url,
    materialize,
    slug_from_url,
    validate_slug,
)
from svckit.errors import FailedPrecondition, InvalidArgument


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("https://github.com/Acme/Billing.git", "github.com/acme/billing"),
        ("https://gitlab.com/group/sub/name", "gitlab.com/group/sub/name"),
        ("git@github.com:acme/billing.git", "github.com/acme/billing"),
        ("ssh://git@example.org:2222/acme/billing.git", "example.org/acme/billing"),
        ("file:///srv/git/team/demo.git", "local/team/demo"),
    ],
)
def test_slug_from_url(url: str, slug: str) -> None:
    assert is_url(url)
    assert slug_from_url(url) == slug


def test_validate_slug() -> None:
    assert validate_slug(" GitHub.com/a/b/ ") == "github.com/a/b"
    for bad in ("a/b", "a", "a//b/c", "../a/b"):
        with pytest.raises(InvalidArgument):
            validate_slug(bad)


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    )


def test_derive_slug_from_origin_or_directory(tmp_path: Path) -> None:
    plain = tmp_path / "team" / "plain"
    plain.mkdir(parents=True)
    assert derive_slug(str(plain)) == "local/team/plain"
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert derive_slug(str(repo)) == f"local/{tmp_path.name.lower()}/repo"
    _git(repo, "remote", "add", "origin", "git@github.com:acme/widgets.git")
    assert derive_slug(str(repo)) == "github.com/acme/widgets"


def _tree(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


FILES = {
    "src/app.py": b"def app():\n    return 1\n",
    "src/.gitignore": b"generated_*.py\n",
    "src/generated_x.py": b"x = 1\n",
    ".gitignore": b"*.log\nout/\n",
    "run.log": b"ignored\n",
    "out/a.py": b"ignored = 1\n",
    "node_modules/pkg/index.js": b"module.exports = 1\n",
    "vendor/dep/dep.go": b"package dep\n",
    "yarn.lock": b"# lock\n",
    "Cargo.lock": b"# lock\n",
    "static/app.min.js": b"var a=1;\n",
    "static/bundle.js": b"var a=1;" * 300 + b"\n",
    "img/logo.png": b"\x89PNG\0\0\0",
    "latin1.txt": "caf\xe9".encode("latin-1"),
    "big.py": b"x = 1\n" * 700,
    "empty.py": b"",
    "README.md": b"# Hi\n",
}


def test_plain_directory_skip_rules_counted_per_reason(tmp_path: Path) -> None:
    _tree(tmp_path, FILES)
    listing = open_snapshot(
        Checkout(tmp_path, "dir", "", ""), SkipRules(max_file_bytes=3000)
    ).list()
    assert sorted(f.path for f in listing.files) == [
        ".gitignore",
        "README.md",
        "src/.gitignore",
        "src/app.py",
    ]
    assert dict(listing.skipped) == {
        "gitignored": 3,  # run.log, out/ (a pruned tree counts once), src/generated_x.py
        "vendored": 2,  # node_modules/, vendor/
        "lockfile": 2,
        "minified": 2,
        "binary": 2,  # NUL bytes, and text that is not UTF-8
        "too_large": 1,
        "empty": 1,
    }
    app = next(f for f in listing.files if f.path == "src/app.py")
    assert len(app.content_hash) == 64 and app.size == len(FILES["src/app.py"])


def test_git_repository_is_read_from_its_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _tree(repo, FILES)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "x")
    # Neither an uncommitted change nor an untracked file is indexed: the commit is.
    (repo / "src" / "app.py").write_bytes(b"changed = True\n")
    (repo / "untracked.py").write_bytes(b"u = 1\n")
    checkout = materialize(str(repo), "h/o/n", "", tmp_path / "data")
    assert checkout.kind == "git" and checkout.branch == "main" and len(checkout.commit) == 40
    assert checkout.root == tmp_path / "data" / "repos" / "h/o/n"  # the service's clone
    listing = open_snapshot(checkout, SkipRules(max_file_bytes=3000)).list()
    paths = {f.path for f in listing.files}
    assert "src/app.py" in paths and "untracked.py" not in paths
    assert "run.log" not in paths  # ignored, so never committed
    assert listing.skipped["vendored"] == 2  # committed node_modules and vendor files
    app = next(f for f in listing.files if f.path == "src/app.py")
    assert app.size == len(FILES["src/app.py"]) and len(app.blob) == 40
    snapshot = open_snapshot(checkout, SkipRules(max_file_bytes=3000))
    assert snapshot.load(app).data == FILES["src/app.py"]


def test_plain_directory_has_no_branches(tmp_path: Path) -> None:
    assert materialize(str(tmp_path), "h/o/n", "", tmp_path / "d").kind == "dir"
    with pytest.raises(FailedPrecondition):
        materialize(str(tmp_path), "h/o/n", "dev", tmp_path / "d")
    with pytest.raises(InvalidArgument):
        materialize(str(tmp_path / "missing"), "h/o/n", "", tmp_path / "d")


def test_other_branch_of_a_local_repository_is_cloned(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _tree(repo, {"a.py": b"a = 1\n"})
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "x")
    _git(repo, "branch", "dev")
    checkout = materialize(str(repo), "h/o/n", "dev", tmp_path / "data")
    assert checkout.kind == "git" and checkout.branch == "dev"
    assert checkout.root == tmp_path / "data" / "repos" / "h/o/n"
    again = materialize(str(repo), "h/o/n", "dev", tmp_path / "data")  # fetch, not re-clone
    assert again.commit == checkout.commit

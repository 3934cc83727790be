"""What an index run reads cannot be steered by the source: a repository's configuration,
hooks and working tree run nothing and change nothing (git sources are read from the
commit's objects), and a plain directory's file swapped for a link, a FIFO or a hard link
is refused when it is read, not followed."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from retrieval.indexing.git import GitError
from retrieval.indexing.git_objects import check_oid, iter_blobs, list_tree
from retrieval.indexing.local_files import NotRegular, TooLarge, read_regular
from retrieval.indexing.snapshots import DirectorySnapshot, Unreadable, open_snapshot
from retrieval.indexing.sources import SkipRules, materialize
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.hostile_repos import (
    COMMITTED,
    SECRET,
    UNCOMMITTED,
    make_hostile_repo,
)


def test_a_hostile_repository_runs_nothing_and_is_indexed_as_committed(tmp_path: Path) -> None:
    hostile = make_hostile_repo(tmp_path)
    # A git command run inside it with its own configuration does run its programs: the
    # repository is armed (the check that makes the assertions below mean something).
    subprocess.run(
        ["git", "-C", str(hostile.root), "diff", "--textconv", "HEAD", "--", "README.md"],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert hostile.ran(), "the hostile repository's drivers should fire under plain git"
    for marker in hostile.markers.iterdir():
        marker.unlink()

    checkout = materialize(str(hostile.root), "local/t/hostile", "", tmp_path / "data")
    assert checkout.kind == "git" and checkout.branch == "main"
    snapshot = open_snapshot(checkout, SkipRules())
    listing = snapshot.list()
    loaded = {f.path: snapshot.load(f) for f in listing.files}

    assert hostile.ran() == []
    # Exactly the committed bytes: no filter output, no uncommitted edit, no untracked
    # file, and neither the committed symlink nor the one in the working tree is followed.
    assert {path: item.data.decode() for path, item in loaded.items()} == COMMITTED
    assert listing.skipped["not_regular"] == 1  # notes/committed_link.md (mode 120000)
    assert all(SECRET.encode() not in item.data for item in loaded.values())
    assert all(UNCOMMITTED.encode() not in item.data for item in loaded.values())
    # Blame dated the lines from the commit (January), not from any file's mtime.
    created, changed = loaded["app/billing.py"].times.span(1, 3)
    assert created.year == 2024 and changed.month == 1

    # Fetching it again (the next run) runs nothing either.
    again = materialize(str(hostile.root), "local/t/hostile", "", tmp_path / "data")
    assert again.commit == checkout.commit and hostile.ran() == []


def test_object_ids_never_reach_git_as_options(tmp_path: Path) -> None:
    for hostile in ("--output=/tmp/x", "HEAD", "a" * 39, "A" * 40, "g" * 40, ""):
        with pytest.raises(GitError):
            check_oid(hostile)
    assert check_oid("a" * 40) == "a" * 40 and check_oid("b" * 64) == "b" * 64


def test_tree_paths_with_any_bytes_and_a_missing_blob(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    odd = "dir with space/tab\tand\nnewline.py"
    write(repo, odd, "x = 1\n")
    write(repo, "plain.py", "y = 2\n")
    commit_all(repo, "odd names", JAN)
    commit = git(repo, "rev-parse", "HEAD").strip()
    entries = list_tree(repo, commit)
    assert [e.path for e in entries] == [odd, "plain.py"]
    assert [data for _, data in iter_blobs(repo, [e.oid for e in entries])] == [
        b"x = 1\n",
        b"y = 2\n",
    ]
    with pytest.raises(GitError):
        list(iter_blobs(repo, ["0" * 40]))


# ------------------------------------------------------------------ plain directories


def _directory(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.md").write_text("# A\n\nText.\n")
    secret = tmp_path / "admin.key"
    secret.write_text(SECRET + "\n")
    return root, secret


def test_a_file_swapped_for_a_link_after_listing_is_refused(tmp_path: Path) -> None:
    root, secret = _directory(tmp_path)
    snapshot = DirectorySnapshot(root, SkipRules())
    listing = snapshot.list()
    [listed] = listing.files
    assert snapshot.load(listed).data == b"# A\n\nText.\n"

    (root / "sub" / "a.md").unlink()
    os.symlink(secret, root / "sub" / "a.md")
    with pytest.raises(Unreadable) as caught:
        snapshot.load(listed)
    assert caught.value.reason == "not_regular"


def test_a_directory_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    root, secret = _directory(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(secret, elsewhere / "a.md")  # even a link inside the linked directory
    (elsewhere / "b.md").write_text(SECRET)
    (root / "sub" / "a.md").unlink()
    (root / "sub").rmdir()
    os.symlink(elsewhere, root / "sub")
    for path in ("sub/a.md", "sub/b.md"):
        with pytest.raises(NotRegular):
            read_regular(root, path, max_bytes=1000)


def test_hard_links_fifos_and_escapes_are_refused(tmp_path: Path) -> None:
    root, secret = _directory(tmp_path)
    os.link(secret, root / "linked.md")
    with pytest.raises(NotRegular):
        read_regular(root, "linked.md", max_bytes=1000)
    os.mkfifo(root / "pipe.md")
    started = time.monotonic()
    with pytest.raises(NotRegular):
        read_regular(root, "pipe.md", max_bytes=1000)  # neither blocks nor reads
    assert time.monotonic() - started < 5
    for escape in ("../admin.key", "sub/../../admin.key", "/etc/passwd", "", "sub//a.md"):
        with pytest.raises(NotRegular):
            read_regular(root, escape, max_bytes=1000)


def test_size_limit_at_its_edge(tmp_path: Path) -> None:
    root, _ = _directory(tmp_path)
    (root / "edge.md").write_bytes(b"x" * 100)
    assert len(read_regular(root, "edge.md", max_bytes=100).data) == 100
    with pytest.raises(TooLarge):
        read_regular(root, "edge.md", max_bytes=99)


def test_a_swapping_file_never_yields_the_linked_bytes(tmp_path: Path) -> None:
    """The attack as it was run: the file flips between a regular file and a link to the
    secret while it is listed and read, over and over."""
    root, secret = _directory(tmp_path)
    target = root / "zz_target.md"
    target.write_text("# Target\n")
    stop = threading.Event()

    flips = 0

    def flip() -> None:
        nonlocal flips
        while not stop.is_set():
            staged = root / ".flip"
            with open(staged, "w") as out:
                out.write("# Target\n")
            os.replace(staged, target)
            link = root / ".link"
            os.symlink(secret, link)
            os.replace(link, target)
            flips += 1

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        snapshot = DirectorySnapshot(root, SkipRules())
        reads = 0
        rounds = 0
        # At least 300 rounds, and on until the file has flipped enough times to have been
        # caught both ways (a loaded machine gives the flipping thread few turns), within a
        # deadline.
        deadline = time.monotonic() + 60
        while rounds < 300 or (flips <= 50 and time.monotonic() < deadline):
            rounds += 1
            for source in snapshot.list().files:
                try:
                    data = snapshot.load(source).data
                except Unreadable:
                    continue
                reads += 1
                assert SECRET.encode() not in data, f"the linked secret was read ({source.path})"
    finally:
        stop.set()
        flipper.join(timeout=5)
    # sub/a.md every time (and the target whenever it was a file), while the target
    # really flipped: how often it was caught as a file depends on the scheduler.
    assert reads >= 300 and flips > 10, f"{reads} reads, {flips} flips"

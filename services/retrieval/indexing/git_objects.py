"""A commit's files read from git's object store, never from a working tree.

What is indexed from a git source is exactly the blobs of the commit being indexed: the
tree comes from `git ls-tree` over that commit, the bytes from `git cat-file`, and line
times from `git blame <commit>`. No working tree is read, so a symlink, a file swapped
while a job runs, a clean/smudge filter or a textconv driver cannot change what is stored;
symlinks (mode 120000) and submodules (160000) are entries of the tree, not files, and are
skipped. Every command here runs in a clone the service made under its data directory
(indexing/sources.py), with the operator's and the system's git configuration left out
(`CONTENT_ENV`): nothing in any configuration can attach a program to these reads.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from retrieval.indexing.git import (
    GitError,
    GitTimeout,
    git_command,
    git_environment,
    kill_group,
    run_git,
)

# Only our clone's own configuration (written by `git clone`) applies to content commands.
CONTENT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
# Reading every blob of a commit once (the listing): generous, a large tree is read at
# hundreds of MB/s; past it the whole process group is killed.
BATCH_TIMEOUT_S = 900.0
# One blob or one file's blame.
BLOB_TIMEOUT_S = 60.0
BLAME_TIMEOUT_S = 120.0

_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
REGULAR_MODES = frozenset({"100644", "100755"})


@dataclass(frozen=True, slots=True)
class TreeEntry:
    path: str  # relative, '/'-separated, as git stores it
    mode: str  # 100644, 100755, 120000 (symlink), 160000 (submodule)
    oid: str  # the blob (or, for a submodule, the commit) id
    size: int  # bytes; -1 for a submodule

    @property
    def regular(self) -> bool:
        return self.mode in REGULAR_MODES


def check_oid(oid: str) -> str:
    """An object id as git prints it (SHA-1 or SHA-256 hex); anything else never reaches
    git's command line."""
    if not _OID.match(oid):
        raise GitError(f"not an object id: {oid[:80]!r}")
    return oid


def list_tree(root: Path, commit: str) -> list[TreeEntry]:
    """Every entry of `commit`'s tree, recursively, sorted by path."""
    out = run_git(
        ["ls-tree", "-r", "-z", "--long", "--full-tree", check_oid(commit)],
        root,
        ceiling=root.parent,
        env=CONTENT_ENV,
    )
    entries: list[TreeEntry] = []
    for record in out.split(b"\0"):
        if not record:
            continue
        # "<mode> SP <type> SP <oid> SP+ <size> TAB <path>"; the path may hold any byte.
        meta, _, raw_path = record.partition(b"\t")
        parts = meta.split()
        if len(parts) != 4:
            raise GitError("git ls-tree printed an entry it should not")
        mode, _kind, oid, size = (p.decode("ascii", errors="replace") for p in parts)
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a path that is not UTF-8 cannot be stored or cited
        entries.append(TreeEntry(path, mode, oid, int(size) if size.isdigit() else -1))
    entries.sort(key=lambda e: e.path)
    return entries


def read_blob(root: Path, oid: str, *, max_bytes: int) -> bytes:
    """One blob's bytes, exactly as stored (`cat-file blob` applies no filter)."""
    return run_git(
        ["cat-file", "blob", check_oid(oid)],
        root,
        ceiling=root.parent,
        env=CONTENT_ENV,
        timeout_s=BLOB_TIMEOUT_S,
        max_output=max_bytes,
    )


def iter_blobs(
    root: Path, oids: Iterable[str], *, timeout_s: float = BATCH_TIMEOUT_S
) -> Iterator[tuple[str, bytes]]:
    """(oid, bytes) for each blob, in order, from one `git cat-file --batch` process.

    The ids go in through a temporary file (no writer thread, no pipe to deadlock on); the
    answers are read as they come, so memory holds one blob at a time. Past `timeout_s`
    the process group is killed and GitTimeout raised.
    """
    wanted = [check_oid(oid) for oid in oids]
    if not wanted:
        return
    environment = git_environment(ceiling=root.parent)
    environment.update(CONTENT_ENV)
    with tempfile.TemporaryFile() as ids:
        ids.write("".join(f"{oid}\n" for oid in wanted).encode())
        ids.seek(0)
        process = subprocess.Popen(
            git_command(["cat-file", "--batch"], root),
            stdin=ids,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,
            close_fds=True,
        )
    assert process.stdout is not None
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        kill_group(process)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        for oid in wanted:
            header = process.stdout.readline()
            fields = header.split()
            if len(fields) != 3 or fields[1] != b"blob":
                raise GitError(f"git cat-file has no blob {oid}")
            size = int(fields[2])
            data = process.stdout.read(size + 1)  # the content and its closing newline
            if len(data) != size + 1:
                raise GitError("git cat-file ended early")
            yield oid, data[:-1]
    except (GitError, ValueError) as err:
        if expired.is_set():
            raise GitTimeout(f"git cat-file did not finish within {timeout_s:g}s") from err
        raise GitError(str(err)) from err
    finally:
        timer.cancel()
        if process.poll() is None:
            kill_group(process)
        process.stdout.close()
        process.wait()


def commit_time(root: Path, commit: str) -> datetime:
    """The committer time of `commit` (the fallback time of lines blame cannot date)."""
    out = run_git(
        ["show", "-s", "--format=%ct", check_oid(commit), "--"],
        root,
        ceiling=root.parent,
        env=CONTENT_ENV,
    )
    return datetime.fromtimestamp(int(out.strip() or 0), tz=UTC)


def blame(root: Path, commit: str, path: str) -> bytes:
    """`git blame --porcelain` of `path` as of `commit`: the commit's blob, never a working
    tree file; `--no-textconv` so no diff driver runs whatever the attributes say."""
    return run_git(
        ["blame", "--porcelain", "--no-textconv", check_oid(commit), "--", path],
        root,
        ceiling=root.parent,
        env=CONTENT_ENV,
        timeout_s=BLAME_TIMEOUT_S,
    )

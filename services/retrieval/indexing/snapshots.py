"""What an index run reads: one fixed version of a source's files.

A git source (a remote, or a local repository, both fetched into the service's clone
first) is read from the objects of the commit being indexed (indexing/git_objects.py);
a plain directory is read file by file without following a link (indexing/local_files.py).
Either way a run lists the files once (`list`) and reads each changed one once more to
index it (`load`): for git the second read is the same blob, for a directory whatever
`load` reads is what is hashed and stored, so a file swapped between the two reads can
change what is indexed only into another regular file of that directory, never into
something it links to.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from retrieval.indexing.blame import LineTimes, parse_porcelain
from retrieval.indexing.git import GitError
from retrieval.indexing.git_objects import (
    blame,
    commit_time,
    iter_blobs,
    list_tree,
    read_blob,
)
from retrieval.indexing.local_files import LocalFile, NotRegular, TooLarge, read_regular
from retrieval.indexing.sources import (
    Checkout,
    Listing,
    SkipRules,
    SourceFile,
    content_skip_reason,
    skip_reason_by_name,
    walk_directory,
)


class Unreadable(Exception):
    """A listed file can no longer be read as it was listed; `reason` is its skip reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Loaded:
    data: bytes
    times: LineTimes

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


class Snapshot(Protocol):
    def list(self) -> Listing:
        """The files to index, with the skip counts per reason."""
        ...

    def load(self, source: SourceFile) -> Loaded:
        """A listed file's bytes and line times; Unreadable if it cannot be read as listed."""
        ...


def _source_file(path: str, data: bytes, blob: str = "") -> SourceFile:
    return SourceFile(path, len(data), hashlib.sha256(data).hexdigest(), blob)


class GitSnapshot:
    """A commit's tree in a clone the service made (never a working tree)."""

    def __init__(self, root: Path, commit: str, rules: SkipRules) -> None:
        self._root = root
        self._commit = commit
        self._rules = rules
        self._committed_at: datetime | None = None

    def list(self) -> Listing:
        skipped: Counter[str] = Counter()
        candidates = []
        for entry in list_tree(self._root, self._commit) if self._commit else []:
            reason = skip_reason_by_name(entry.path)
            if reason is None and not entry.regular:
                reason = "not_regular"  # a symlink or a submodule is no file of this tree
            elif reason is None and entry.size > self._rules.max_file_bytes:
                reason = "too_large"
            if reason:
                skipped[reason] += 1
            else:
                candidates.append(entry)
        files: list[SourceFile] = []
        blobs = iter_blobs(self._root, [entry.oid for entry in candidates])
        for entry, (_oid, data) in zip(candidates, blobs, strict=True):
            reason = content_skip_reason(entry.path, data)
            if reason:
                skipped[reason] += 1
            else:
                files.append(_source_file(entry.path, data, entry.oid))
        return Listing(files, skipped)

    def load(self, source: SourceFile) -> Loaded:
        try:
            data = read_blob(self._root, source.blob, max_bytes=self._rules.max_file_bytes)
        except GitError as err:
            raise Unreadable(source.path, "unreadable") from err
        fallback = self._commit_time()
        try:
            times = parse_porcelain(blame(self._root, self._commit, source.path), fallback)
        except GitError:  # not blamable or too slow: the commit's own time will do
            times = []
        return Loaded(data, LineTimes(times, fallback))

    def _commit_time(self) -> datetime:
        if self._committed_at is None:
            try:
                self._committed_at = commit_time(self._root, self._commit)
            except GitError:
                self._committed_at = datetime.now(UTC)
        return self._committed_at


class DirectorySnapshot:
    """A plain directory, each file read without following links (local_files)."""

    def __init__(self, root: Path, rules: SkipRules) -> None:
        self._root = root
        self._rules = rules

    def list(self) -> Listing:
        skipped: Counter[str] = Counter()
        files: list[SourceFile] = []
        for path in walk_directory(self._root, skipped):
            reason = skip_reason_by_name(path)
            if reason is None:
                try:
                    data = self._read(path).data
                except Unreadable as err:
                    reason = err.reason
                else:
                    reason = content_skip_reason(path, data)
            if reason:
                skipped[reason] += 1
            else:
                files.append(_source_file(path, data))
        return Listing(files, skipped)

    def load(self, source: SourceFile) -> Loaded:
        read = self._read(source.path)
        reason = content_skip_reason(source.path, read.data)
        if reason:
            raise Unreadable(source.path, reason)  # it changed into something not indexed
        return Loaded(read.data, LineTimes((), read.modified))

    def _read(self, path: str) -> LocalFile:
        return read_listed(self._root, path, max_bytes=self._rules.max_file_bytes)


def read_listed(root: Path, path: str, *, max_bytes: int) -> LocalFile:
    """A plain directory's file, read as local_files reads it; Unreadable with the skip
    reason (not_regular, too_large, unreadable) when it cannot be."""
    try:
        return read_regular(root, path, max_bytes=max_bytes)
    except NotRegular as err:
        raise Unreadable(path, "not_regular") from err
    except TooLarge as err:
        raise Unreadable(path, "too_large") from err
    except OSError as err:
        raise Unreadable(path, "unreadable") from err


def open_snapshot(checkout: Checkout, rules: SkipRules) -> Snapshot:
    if checkout.uses_git:
        return GitSnapshot(checkout.root, checkout.commit, rules)
    return DirectorySnapshot(checkout.root, rules)

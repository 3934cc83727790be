"""Freshness against real git repositories: current, stale, cached, unreachable, plain dirs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from retrieval.indexing.freshness import Freshness, HeadProbe, IndexedSource
from tests.integration.support.git_repos import JAN, MAR, commit_all, git, write


def repo_with_commit(root: Path) -> str:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "a.py", "x = 1\n")
    commit_all(root, "first", JAN)
    return git(root, "rev-parse", "HEAD")


def indexed(
    root: Path | str, commit: str, branch: str = "main", kind: str = "git"
) -> IndexedSource:
    return IndexedSource(str(root), kind, branch, commit)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_current_then_stale_after_a_new_commit(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first = repo_with_commit(root)
    probe = HeadProbe(timeout_s=10, ttl_s=0)
    check = await probe.check(indexed(root, first))
    assert check.freshness is Freshness.CURRENT and check.head_commit == first

    write(root, "a.py", "x = 2\n")
    commit_all(root, "second", MAR)
    second = git(root, "rev-parse", "HEAD")
    check = await probe.check(indexed(root, first))
    assert check.freshness is Freshness.STALE
    assert check.head_commit == second and check.detail == ""


async def test_a_url_source_and_a_detached_head(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first = repo_with_commit(root)
    probe = HeadProbe(timeout_s=10, ttl_s=0)
    by_url = await probe.check(indexed(root.as_uri(), first, kind="url"))
    assert by_url.freshness is Freshness.CURRENT and by_url.head_commit == first
    git(root, "checkout", "-q", "--detach")
    detached = await probe.check(indexed(root, first, branch="HEAD"))
    assert detached.freshness is Freshness.CURRENT


async def test_a_looked_up_head_is_trusted_for_the_ttl(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first = repo_with_commit(root)
    clock = Clock()
    probe = HeadProbe(timeout_s=10, ttl_s=30, clock=clock)
    assert (await probe.check(indexed(root, first))).freshness is Freshness.CURRENT
    write(root, "a.py", "x = 3\n")
    commit_all(root, "second", MAR)
    clock.now = 29.0
    assert (await probe.check(indexed(root, first))).freshness is Freshness.CURRENT
    clock.now = 30.0
    assert (await probe.check(indexed(root, first))).freshness is Freshness.STALE


async def test_unknown_with_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    first = repo_with_commit(root)
    probe = HeadProbe(timeout_s=10, ttl_s=0)

    plain = await probe.check(indexed(tmp_path, "", branch="", kind="dir"))
    assert plain.freshness is Freshness.UNKNOWN and "plain directory" in plain.detail

    gone_branch = await probe.check(indexed(root, first, branch="release"))
    assert gone_branch.freshness is Freshness.UNKNOWN
    assert "refs/heads/release" in gone_branch.detail and gone_branch.head_commit == ""

    missing = await probe.check(indexed(tmp_path / "deleted", first))
    assert missing.freshness is Freshness.UNKNOWN
    assert missing.detail.startswith("cannot read the source's head:")


@pytest.fixture
async def silent_server() -> AsyncIterator[int]:
    """A TCP server that accepts and never answers, like a remote that hangs."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_hanging_remote_is_cut_off_by_the_timeout(silent_server: int) -> None:
    probe = HeadProbe(timeout_s=0.5, ttl_s=0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    check = await probe.check(
        indexed(f"git://127.0.0.1:{silent_server}/team/repo", "a" * 40, kind="url")
    )
    assert loop.time() - started < 5
    assert check.freshness is Freshness.UNKNOWN
    assert "did not answer within 0.5s" in check.detail


async def test_many_sources_are_checked_together(tmp_path: Path) -> None:
    roots = [tmp_path / f"r{i}" for i in range(3)]
    commits = [repo_with_commit(r) for r in roots]
    probe = HeadProbe(timeout_s=10, ttl_s=0, concurrency=2)
    checks = await probe.check_all(
        [indexed(roots[0], commits[0]), indexed(roots[1], "0" * 40), indexed(roots[2], commits[2])]
    )
    assert [c.freshness for c in checks] == [Freshness.CURRENT, Freshness.STALE, Freshness.CURRENT]
    assert checks[1].head_commit == commits[1]

"""Sync scheduling as pure logic: the interval cut by jitter, backoff doubling per failure
up to its cap, the settings' bounds, and the directory fingerprint a check compares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrieval.indexing.indexer import own_repository_request, repository_request
from retrieval.indexing.sync import (
    JITTER,
    MAX_POLL_S,
    Schedule,
    Syncer,
    Target,
    Verdict,
    directory_fingerprint,
    verdict,
)
from retrieval.settings import MIN_SYNC_INTERVAL_S, SyncSettings
from svckit.config import ConfigError, Env

LOWEST = 0.0  # a draw of 0 keeps the whole wait
HIGHEST = 0.999999  # a draw near 1 cuts the most


def test_a_healthy_target_waits_the_interval_less_up_to_the_jitter() -> None:
    schedule = Schedule(interval_s=300.0, backoff_max_s=3600.0)
    assert schedule.delay(0, LOWEST) == 300.0
    assert schedule.delay(0, HIGHEST) == pytest.approx(300.0 * (1 - JITTER))
    assert schedule.delay(0, 0.5) == pytest.approx(300.0 * (1 - JITTER / 2))
    # Never longer than the interval: a check is never late because of the jitter.
    assert all(schedule.delay(0, d / 100) <= 300.0 for d in range(100))


def test_failures_double_the_wait_up_to_the_cap() -> None:
    schedule = Schedule(interval_s=300.0, backoff_max_s=3600.0, jitter=0.0)
    assert [schedule.delay(f, LOWEST) for f in range(6)] == [
        300.0,
        600.0,
        1200.0,
        2400.0,
        3600.0,
        3600.0,
    ]
    # No overflow however long a source has been failing.
    assert schedule.delay(10_000, LOWEST) == 3600.0
    assert schedule.delay(-1, LOWEST) == 300.0


def test_with_jitter_each_failure_still_waits_longer_than_the_one_before() -> None:
    schedule = Schedule(interval_s=1.0, backoff_max_s=1e9)
    for failures in range(20):
        longest_before = schedule.delay(failures, LOWEST)
        shortest_after = schedule.delay(failures + 1, HIGHEST)
        assert shortest_after > longest_before


def test_a_cap_below_the_interval_is_the_interval() -> None:
    schedule = Schedule(interval_s=600.0, backoff_max_s=60.0, jitter=0.0)
    assert schedule.cap_s == 600.0
    assert schedule.delay(3, LOWEST) == 600.0


def test_replicas_poll_at_most_every_few_seconds() -> None:
    assert Schedule(300.0, 3600.0).poll_s == MAX_POLL_S
    assert Schedule(0.5, 3600.0).poll_s == 0.5


def test_verdicts() -> None:
    # Unchanged: nothing queued, healthy again after failures.
    assert verdict(0, moved=False, previous_run_failed=False) == Verdict(False, 0)
    assert verdict(3, moved=False, previous_run_failed=False) == Verdict(False, 0)
    # Moved: queued.
    assert verdict(2, moved=True, previous_run_failed=False) == Verdict(True, 0)
    # The run the last check queued failed: queued again, and it counts as a failure, so
    # the next check waits longer (moved or not: the index still lacks the change).
    assert verdict(0, moved=False, previous_run_failed=True) == Verdict(True, 1)
    assert verdict(4, moved=True, previous_run_failed=True) == Verdict(True, 5)


def _sync(**values: str) -> SyncSettings:
    return SyncSettings.from_env(Env(values))


def test_settings_defaults_and_off() -> None:
    default = _sync()
    assert (default.interval_s, default.concurrency, default.backoff_max_s) == (300.0, 4, 3600.0)
    assert default.enabled
    assert not _sync(RETRIEVAL_SYNC_INTERVAL_S="0").enabled


@pytest.mark.parametrize(
    ("name", "value", "ok"),
    [
        ("RETRIEVAL_SYNC_INTERVAL_S", "-1", False),
        ("RETRIEVAL_SYNC_INTERVAL_S", "0.05", False),
        ("RETRIEVAL_SYNC_INTERVAL_S", str(MIN_SYNC_INTERVAL_S), True),
        ("RETRIEVAL_SYNC_INTERVAL_S", "604800", True),
        ("RETRIEVAL_SYNC_INTERVAL_S", "604801", False),
        ("RETRIEVAL_SYNC_CONCURRENCY", "0", False),
        ("RETRIEVAL_SYNC_CONCURRENCY", "1", True),
        ("RETRIEVAL_SYNC_CONCURRENCY", "64", True),
        ("RETRIEVAL_SYNC_CONCURRENCY", "65", False),
        ("RETRIEVAL_SYNC_BACKOFF_MAX_S", "0.5", False),
        ("RETRIEVAL_SYNC_BACKOFF_MAX_S", "1", True),
        ("RETRIEVAL_SYNC_BACKOFF_MAX_S", "604800", True),
        ("RETRIEVAL_SYNC_BACKOFF_MAX_S", "604801", False),
    ],
)
def test_settings_bounds(name: str, value: str, ok: bool) -> None:
    if ok:
        _sync(**{name: value})
    else:
        with pytest.raises(ConfigError, match=name):
            _sync(**{name: value})


def test_fingerprint_follows_what_indexing_would_list(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "a.md").write_text("# A\n")
    (root / "guide" / "b.md").write_text("# B\n")
    (root / ".gitignore").write_text("build/\n")
    first = directory_fingerprint(root)
    assert first == directory_fingerprint(root)  # nothing changed, nothing read

    # What indexing skips does not count: ignored trees, .git, vendored directories.
    (root / "build").mkdir()
    (root / "build" / "out.md").write_text("generated\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "x.md").write_text("vendored\n")
    assert directory_fingerprint(root) == first

    # A new file, an edit (size or mtime), a removal: each changes it.
    (root / "c.md").write_text("# C\n")
    added = directory_fingerprint(root)
    assert added != first
    (root / "c.md").write_text("# C, longer\n")
    edited = directory_fingerprint(root)
    assert edited != added
    stamp = os.stat(root / "a.md").st_mtime_ns
    os.utime(root / "a.md", ns=(stamp + 10**9, stamp + 10**9))  # same size, touched
    touched = directory_fingerprint(root)
    assert touched != edited
    (root / "c.md").unlink()
    assert directory_fingerprint(root) not in (first, added, edited, touched)


def test_a_remote_sources_sync_run_checks_its_host_as_a_writer_would() -> None:
    """The sync's jobs are an admin's, but a remote source may have been set by a key with
    a write grant: its run checks the host without an admin's authority, so a name that now
    resolves to an internal address is refused (the indexer reads public_hosts_only)."""

    def target(source: str, kind: str) -> Target:
        return Target("repository", 1, "h/o/n", source, kind, "main", "c" * 40, "", 0, "", None)

    remote = repository_request(Syncer._request(target("https://example.com/o/n.git", "url")))
    assert remote.public_hosts_only
    local = repository_request(Syncer._request(target("/srv/git/n", "git")))
    assert not local.public_hosts_only
    # Jobs queued by anyone else keep the requester's own authority.
    assert not repository_request(
        {"source": "https://example.com/o/n.git", "slug": "h/o/n"}
    ).public_hosts_only
    # The re-index after an upgrade builds its runs the same way, without a stored secret.
    upgrade = own_repository_request("https://deploy:hunter2@example.com/o/n.git", "h/o/n", "")
    assert upgrade.public_hosts_only and "hunter2" not in upgrade.source

"""Hostile sources, branches and slugs are refused before git or the file system sees them;
the git runner is bounded and refuses dangerous transports; the local-source policy keeps
the data directory out of reach."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.indexing.freshness import Freshness, HeadProbe, IndexedSource
from retrieval.indexing.git import GitError, GitTimeout, git_environment, run_git
from retrieval.indexing.snapshots import open_snapshot
from retrieval.indexing.source_policy import (
    LocalPolicy,
    check_branch,
    check_slug,
    clone_path,
    parse_source,
)
from retrieval.indexing.sources import Checkout, SkipRules, materialize, remove_clone
from retrieval.settings import IndexSettings
from svckit.config import ConfigError, Env
from svckit.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from tests.integration.support.git_repos import JAN, commit_all, git, write

INJECTIONS = [
    "-ush:x;touch /tmp/pwned;exit 1;",
    "--upload-pack=touch /tmp/pwned",
    "-c core.sshCommand=touch /tmp/pwned",
    "--config=core.sshCommand=touch /tmp/pwned",
]
HELPERS = ["ext::sh -c touch% /tmp/pwned", "fd::0", "fd::3,4", "EXT::sh", "x-y.z+w::foo"]


@pytest.mark.parametrize("source", INJECTIONS + HELPERS)
def test_option_and_remote_helper_sources_are_refused(source: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_source(source)


@pytest.mark.parametrize(
    "source",
    [
        "http://example.com/a/b.git",  # not on the allow-list
        "ftp://example.com/a/b",
        "rsync://example.com/a/b",
        "https://-oProxyCommand=x/a/b",  # host that reads as an ssh option
        "ssh://-oProxyCommand=touch%20x@host/a",  # user that reads as an option
        "ssh://git@-oProxyCommand=x/a",
        "-oProxyCommand=x:foo/bar",
        "git@-oProxyCommand=x:foo",
        "git@host:-foo",
        "https://example.com/",  # no repository path
        "https://exa mple.com/a/b",
        "https://example.com/a\nb",
        "https://example.com/a\x00b",
        "/srv/a\nb",
        "file://otherhost/srv/a",
        "relative/dir",
        "git@-oProxyCommand=touch /tmp/x:y",
        "x" * 5000,
        "",
        "   ",
    ],
)
def test_malformed_sources_are_refused(source: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_source(source)


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("https://github.com/acme/billing.git", "remote"),
        ("ssh://git@example.org:2222/acme/billing.git", "remote"),
        ("git://127.0.0.1:9418/x", "remote"),
        ("git@github.com:acme/billing.git", "remote"),
        ("github.com:acme/billing", "remote"),
        ("file:///srv/git/team/demo.git", "file_url"),
        ("/srv/checkouts/billing", "path"),
        ("~/src/billing", "path"),
    ],
)
def test_allowed_sources_are_classified(source: str, kind: str) -> None:
    checked = parse_source(source)
    assert checked.kind == kind
    assert checked.is_local == (kind != "remote")


@pytest.mark.parametrize(
    "branch",
    [
        "-b",
        "--upload-pack=x",
        "a..b",
        "main\n",
        "a b",
        "@{-1}",
        "a~1",
        "a^",
        "a:b",
        "refs/heads/../x",
        ".hidden",
        "x.lock",
        "x/",
        "a//b",
        "x" * 300,
    ],
)
def test_bad_branches_are_refused(branch: str) -> None:
    with pytest.raises(InvalidArgument):
        check_branch(branch)


def test_good_branches_pass() -> None:
    assert check_branch("") == ""
    assert check_branch(" feature/retry-2.1_x ") == "feature/retry-2.1_x"
    assert check_branch("release+1") == "release+1"


@pytest.mark.parametrize(
    "slug",
    [
        "a/b",
        "../a/b",
        "a/../b",
        "a/b/..",
        "a/./b/c",
        "./a/b",
        "a//b/c",
        "host/-x/y",
        "host/.x/y",
        "host/_x/y",
        "host/o/n\n",
        "host/o/n\x00",
        "host/o/n m",
        "a/" * 200 + "b",
    ],
)
def test_bad_slugs_are_refused(slug: str) -> None:
    with pytest.raises(InvalidArgument):
        check_slug(slug)


def test_slugs_are_normalised() -> None:
    assert check_slug(" GitHub.com/Acme/Billing_2/ ") == "github.com/acme/billing_2"


def test_clone_path_stays_inside_the_clones(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert clone_path(data, "host/o/n") == (data / "repos" / "host" / "o" / "n").resolve()
    # A symlink planted inside the clones cannot lead a clone elsewhere.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (data / "repos" / "host").mkdir(parents=True)
    (data / "repos" / "host" / "link").symlink_to(outside)
    with pytest.raises(InvalidArgument):
        clone_path(data, "host/link/n")
    # Nor can one repository be cloned inside another's working tree.
    (data / "repos" / "host" / "o" / "n" / ".git").mkdir(parents=True)
    with pytest.raises(FailedPrecondition):
        clone_path(data, "host/o/n/sub/x")


def test_remove_clone_never_leaves_the_clones(tmp_path: Path) -> None:
    data = tmp_path / "data"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("x")
    for slug in ("../victim/x", "host/../../victim", "local/../../victim"):
        remove_clone(data, slug)
    assert (victim / "keep.txt").exists()


# ------------------------------------------------------------------ local policy


def test_local_policy_admin_only_by_default(tmp_path: Path) -> None:
    policy = LocalPolicy("admin", tmp_path / "data")
    source = tmp_path / "src"
    source.mkdir()
    with pytest.raises(PermissionDenied, match="needs an admin key"):
        policy.check_directory(source, admin=False)
    # Refused before the path is looked at: a missing path reads the same.
    with pytest.raises(PermissionDenied, match="needs an admin key"):
        policy.check_directory(tmp_path / "missing", admin=False)
    assert policy.check_directory(source, admin=True) == source.resolve()
    assert LocalPolicy("any", tmp_path / "data").check_directory(source, admin=False)


def test_local_policy_never_reaches_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "home" / "data"
    (data / "repos").mkdir(parents=True)
    (data / "admin.key").write_text("secret")
    policy = LocalPolicy("any", data)
    link = tmp_path / "innocent"
    link.symlink_to(data)
    for path in (data, data / "repos", data.parent, tmp_path, Path("/"), link):
        with pytest.raises(PermissionDenied, match="data directory"):
            policy.check_directory(path, admin=True)
    with pytest.raises(InvalidArgument, match="absolute"):
        policy.check_directory("relative/dir", admin=True)
    with pytest.raises(InvalidArgument, match="neither a directory"):
        policy.check_directory(tmp_path / "missing", admin=True)


def test_local_roots_confine_admin_paths(tmp_path: Path) -> None:
    allowed = tmp_path / "checkouts"
    (allowed / "billing").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    policy = LocalPolicy("admin", tmp_path / "data", (allowed,))
    assert policy.check_directory(allowed / "billing", admin=True)
    with pytest.raises(PermissionDenied, match="RETRIEVAL_LOCAL_ROOTS"):
        policy.check_directory(other, admin=True)
    escape = allowed / "escape"
    escape.symlink_to(other)
    with pytest.raises(PermissionDenied, match="RETRIEVAL_LOCAL_ROOTS"):
        policy.check_directory(escape, admin=True)


def test_settings_defaults_and_checks() -> None:
    settings = IndexSettings.from_env(Env({}))
    assert settings.local_sources == "admin" and settings.create_sources == "admin"
    assert settings.local_roots == () and settings.max_concurrent_jobs == 2
    assert settings.git_timeout_s == 300.0
    custom = IndexSettings.from_env(
        Env(
            {
                "RETRIEVAL_LOCAL_SOURCES": "any",
                "RETRIEVAL_CREATE_SOURCES": "any",
                "RETRIEVAL_LOCAL_ROOTS": "/srv/a:/srv/b",
                "RETRIEVAL_GIT_TIMEOUT_S": "20",
            }
        )
    )
    assert custom.local_roots == (Path("/srv/a"), Path("/srv/b"))
    assert custom.local_sources == custom.create_sources == "any"
    for name, value in (
        ("RETRIEVAL_LOCAL_SOURCES", "nobody"),
        ("RETRIEVAL_CREATE_SOURCES", "everyone"),
        ("RETRIEVAL_LOCAL_ROOTS", "relative/dir"),
        ("RETRIEVAL_GIT_TIMEOUT_S", "0"),
    ):
        with pytest.raises(ConfigError, match=name):
            IndexSettings.from_env(Env({name: value}))


# ------------------------------------------------------------------ the git runner


def test_git_environment_is_scrubbed_and_guarded() -> None:
    env = git_environment(
        base={
            "PATH": "/usr/bin",
            "GIT_DIR": "/elsewhere",
            "GIT_SSH_COMMAND": "touch /tmp/x",
            "GIT_CONFIG_PARAMETERS": "'core.sshCommand'='touch /tmp/x'",
            "GIT_CONFIG_GLOBAL": "/etc/gitconfig-ops",
        }
    )
    assert "GIT_DIR" not in env and "GIT_CONFIG_PARAMETERS" not in env
    assert env["GIT_SSH_COMMAND"].startswith("ssh -o BatchMode=yes")
    assert env["GIT_CONFIG_GLOBAL"] == "/etc/gitconfig-ops"
    assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh:git"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_ASKPASS"] == ""
    assert git_environment(allow_file=True)["GIT_ALLOW_PROTOCOL"] == "https:ssh:git:file"


def _origin(tmp_path: Path) -> Path:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    write(origin, "a.py", "x = 1\n")
    commit_all(origin, "first", JAN)
    return origin


def test_file_transport_needs_an_explicit_allowance(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    with pytest.raises(GitError, match="transport 'file' not allowed"):
        run_git(["ls-remote", "--", origin.as_uri()])
    with pytest.raises(GitError, match="not allowed"):
        run_git(["ls-remote", "--", str(origin)])
    assert b"refs/heads/main" in run_git(["ls-remote", "--", str(origin)], allow_file=True)


def test_remote_helpers_never_run_even_if_they_reach_git(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for url in (f"ext::sh -c touch% {marker}", "fd::0"):
        with pytest.raises(GitError):
            run_git(["ls-remote", "--", url], allow_file=True, timeout_s=10)
    assert not marker.exists()


def test_repository_hooks_and_fsmonitor_never_run(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    marker = tmp_path / "pwned"
    hook = origin / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(origin, "config", "core.fsmonitor", f"touch {marker}; false")
    run_git(["status", "--porcelain"], origin)
    run_git(["checkout", "-q", "-B", "other"], origin)
    assert not marker.exists()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener that accepts connections and never says anything."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_a_silent_remote_is_cut_off_at_the_deadline(silent_server: int, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(GitTimeout, match=r"did not finish within 1\.5s"):
        run_git(["ls-remote", "--", f"git://127.0.0.1:{silent_server}/x"], timeout_s=1.5)
    assert time.monotonic() - started < 6


def test_output_is_capped(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    with pytest.raises(GitError, match="printed more than"):
        run_git(["log", "-p", "--", "."], origin, max_output=10)


# ------------------------------------------------------------------ materialize


def test_materialize_refuses_hostile_input_before_git(tmp_path: Path) -> None:
    data = tmp_path / "data"
    marker = tmp_path / "pwned"
    for source in (f"-ush:x;touch {marker};exit 1;", f"--upload-pack=touch {marker}", "fd::0"):
        with pytest.raises(InvalidArgument):
            materialize(source, "host/o/n", "", data)
    origin = _origin(tmp_path)
    with pytest.raises(InvalidArgument):
        materialize(origin.as_uri(), "host/o/n", f"--upload-pack=touch {marker}", data)
    with pytest.raises(InvalidArgument):
        materialize(origin.as_uri(), "../../escape/x", "", data)
    assert not marker.exists()
    assert not (tmp_path / "escape").exists()


def test_a_changed_source_is_cloned_afresh(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _origin(tmp_path)
    second = tmp_path / "second"
    second.mkdir()
    git(second, "init", "-q", "-b", "main")
    write(second, "b.py", "y = 2\n")
    commit_all(second, "other", JAN)
    checkout = materialize(first.as_uri(), "host/o/n", "", data)
    assert _paths(checkout) == {"a.py"}
    checkout = materialize(second.as_uri(), "host/o/n", "", data)
    assert _paths(checkout) == {"b.py"}
    # An update of the same source fetches and indexes the branch's new head.
    write(second, "c.py", "z = 3\n")
    commit_all(second, "more", JAN)
    checkout = materialize(second.as_uri(), "host/o/n", "main", data)
    assert _paths(checkout) == {"b.py", "c.py"} and checkout.branch == "main"


def _paths(checkout: Checkout) -> set[str]:
    return {f.path for f in open_snapshot(checkout, SkipRules()).list().files}


async def test_freshness_never_hands_a_stored_hostile_source_to_git(tmp_path: Path) -> None:
    """Rows written before validation existed are checked again before `git ls-remote`."""
    marker = tmp_path / "pwned"
    probe = HeadProbe(timeout_s=5, ttl_s=0)
    origin = _origin(tmp_path)
    for source, branch in (
        (f"-ush:touch {marker};exit 1;", "main"),
        (f"ext::sh -c touch% {marker}", "main"),
        ("fd::0", "main"),
        (origin.as_uri(), f"--upload-pack=touch {marker}"),
    ):
        check = await probe.check(IndexedSource(source, "url", branch, "0" * 40))
        assert check.freshness is Freshness.UNKNOWN, (source, branch)
    assert not marker.exists()
    current = await probe.check(
        IndexedSource(origin.as_uri(), "url", "main", git(origin, "rev-parse", "HEAD"))
    )
    assert current.freshness is Freshness.CURRENT

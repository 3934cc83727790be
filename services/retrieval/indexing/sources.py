"""Where a repository's files come from, what it is called, and which files are skipped.

A source is a git URL, a local git repository or a plain directory (no git: times from
mtimes). Every git source is cloned (a local one over `file://`) into the data directory
and fetched there on each run, without a working tree: what is indexed is read from the
objects of the commit the clone's branch points at (indexing/snapshots.py), never from the
caller's working tree, so nothing in that tree or its configuration takes part. Skipped
files are counted per reason so that the caller can see why a file is missing.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pathspec

from retrieval.indexing.credentials import GitAuth
from retrieval.indexing.git import QUICK_TIMEOUT_S, GitError, run_git_text
from retrieval.indexing.refs import TAG_PREFIX, split_ref_slug
from retrieval.indexing.source_policy import (
    LocalPolicy,
    check_branch,
    check_slug,
    clone_path,
    parse_source,
    repos_root,
)
from svckit.errors import FailedPrecondition, InvalidArgument

_SCP_URL = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")
# Directories of vendored, generated or tool state; their files are never indexed.
VENDORED_DIRS = frozenset(
    {
        "node_modules",
        "vendor",
        "third_party",
        "bower_components",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "dist",
        ".next",
        ".gradle",
        "target",
    }
)
LOCK_FILES = frozenset(
    {
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "npm-shrinkwrap.json",
        "bun.lockb",
        "Cargo.lock",
        "poetry.lock",
        "Pipfile.lock",
        "uv.lock",
        "pdm.lock",
        "go.sum",
        "Gemfile.lock",
        "composer.lock",
        "mix.lock",
        "flake.lock",
        "packages.lock.json",
        "Podfile.lock",
    }
)
_MINIFIED_SUFFIXES = (".min.js", ".min.css", ".min.mjs", ".bundle.js", ".map")
_MINIFIED_LINE = 1000  # a JS/CSS line longer than this means generated code


def git(
    root: Path | None,
    *args: str,
    timeout: float = QUICK_TIMEOUT_S,
    allow_file: bool = False,
    ceiling: Path | None = None,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> str:
    """Runs git through the service's one guarded runner (retrieval.indexing.git)."""
    return run_git_text(
        args,
        root,
        timeout_s=timeout,
        allow_file=allow_file,
        ceiling=ceiling,
        config=config,
        env=env,
    )


def is_url(source: str) -> bool:
    """Whether `source` names a remote (or file://) repository rather than a server path."""
    return parse_source(source).kind != "path"


def _clean_parts(parts: list[str]) -> list[str]:
    # Leading '.', '_' and '-' would make an invalid slug segment; `.github` -> `github`.
    cleaned = [p.lstrip("._-") for p in parts if p and p not in (".", "..")]
    if cleaned and cleaned[-1].endswith(".git"):
        cleaned[-1] = cleaned[-1][: -len(".git")]
    return [p for p in cleaned if p]


def slug_from_url(url: str) -> str:
    """`https://github.com/o/n.git`, `git@github.com:o/n.git` -> `github.com/o/n`;
    `file:///srv/git/team/n` -> `local/team/n`."""
    scp = _SCP_URL.match(url) if "://" not in url else None
    if scp:
        host, path = scp.group(1), scp.group(2)
    else:
        parsed = urlparse(url)
        host, path = parsed.hostname or "", parsed.path
    parts = _clean_parts(path.split("/"))
    if not host or host == "localhost" or url.startswith("file:"):
        return "/".join(["local", *parts[-2:]]).lower() if len(parts) >= 2 else ""
    if not parts:
        return ""
    return "/".join([host, *parts]).lower()


def slug_for_directory(path: Path) -> str:
    """`local/<parent>/<name>` for a directory without a usable remote."""
    resolved = path.resolve()
    parts = _clean_parts([resolved.parent.name or "root", resolved.name])
    return "/".join(["local", *parts]).lower()


def validate_slug(slug: str) -> str:
    return check_slug(slug)


def git_toplevel(path: Path) -> Path | None:
    try:
        return Path(git(path, "rev-parse", "--show-toplevel")).resolve()
    except GitError:
        return None


def derive_slug(source: str) -> str:
    """The slug a source gets when the caller gives none (a local source must already have
    passed the local-source policy: this looks at its git remote)."""
    if is_url(source):
        slug = slug_from_url(source)
        if not slug:
            raise InvalidArgument(f"cannot derive a slug from {source!r}; pass one")
        return slug
    path = Path(source).expanduser()
    if git_toplevel(path) == path.resolve():
        try:
            remote = git(path, "remote", "get-url", "origin")
        except GitError:
            remote = ""
        try:
            remote_is_url = bool(remote) and is_url(remote)
        except InvalidArgument:
            remote_is_url = False
        if remote_is_url:
            slug = slug_from_url(remote)
            if slug:
                return slug
    return slug_for_directory(path)


@dataclass(frozen=True)
class Checkout:
    """A source made ready to read: its root and what git says about it."""

    root: Path
    kind: str  # git (a local repository), url (a remote), both our clone; dir (plain)
    branch: str
    commit: str

    @property
    def uses_git(self) -> bool:
        return self.kind in ("git", "url")


def clone_dir(data_dir: Path, slug: str) -> Path:
    """Where a URL source (or another branch of a local repository) is cloned; checked to
    lie inside `<data_dir>/repos` (source_policy.clone_path). An indexed ref
    (`<slug>@<ref>`, indexing/refs.py) has a clone of its own under `<data_dir>/refs`, so
    that its runs and the repository's never fetch into one clone at once."""
    parent, ref = split_ref_slug(slug)
    if ref:
        return _ref_clone_path(data_dir, parent, ref)
    return clone_path(data_dir, slug)


def _refs_root(data_dir: Path) -> Path:
    return data_dir / "refs"


def _ref_clone_path(data_dir: Path, slug: str, ref: str) -> Path:
    # The ref's name is hashed: it may hold '/' and needs no directory of its own per part.
    root = _refs_root(data_dir).resolve()
    target = (root / check_slug(slug) / hashlib.sha256(ref.encode()).hexdigest()[:32]).resolve()
    if not target.is_relative_to(root) or target == root:
        raise InvalidArgument(f"slug {slug!r} does not name a directory inside the clones")
    return target


def remove_clone(data_dir: Path, slug: str) -> None:
    """Deletes our clone of a repository (and those of its indexed refs) or of one ref, if
    any; never anything outside `<data_dir>/repos` and `<data_dir>/refs`."""
    parent, ref = split_ref_slug(slug)
    targets: list[tuple[Path, Path]] = []
    try:
        if ref:
            targets.append((_ref_clone_path(data_dir, parent, ref), _refs_root(data_dir)))
        else:
            targets.append((clone_path(data_dir, slug), repos_root(data_dir)))
            targets.append(
                (_refs_root(data_dir).resolve() / check_slug(slug), _refs_root(data_dir))
            )
    except (InvalidArgument, FailedPrecondition):
        return
    for target, root_dir in targets:
        root = root_dir.resolve()
        if target.is_relative_to(root) and target != root and target.is_dir():
            shutil.rmtree(target, ignore_errors=True)


@dataclass(frozen=True)
class GitLimits:
    """Deadlines of the git commands an index run makes."""

    network_timeout_s: float = 300.0  # clone and fetch


def _is_our_clone(dest: Path) -> bool:
    dot_git = dest / ".git"
    return dot_git.is_dir() and not dot_git.is_symlink()


def _default_branch(dest: Path, ceiling: Path) -> str:
    """The remote's default branch as the clone recorded it (origin/HEAD), else the branch
    a fresh clone of a repository without commits points HEAD at."""
    try:
        head = git(dest, "rev-parse", "--abbrev-ref", "origin/HEAD", ceiling=ceiling)
        name = head.split("/", 1)[1] if "/" in head else ""
    except GitError:
        name = git(dest, "symbolic-ref", "--short", "-q", "HEAD", ceiling=ceiling)
    return check_branch(name)


def _clone_or_update(
    url: str,
    dest: Path,
    branch: str,
    *,
    allow_file: bool,
    limits: GitLimits,
    network: Sequence[str] = (),
    auth: GitAuth | None = None,
) -> None:
    """Clones `url` into `dest`, or fetches it there; `network` is the git configuration
    the source policy returned for it and `auth` its credential (both given to the calls
    that reach the remote only). The branch's commit is `refs/remotes/origin/<branch>`
    afterwards (_git_checkout)."""
    ceiling = dest.parent
    timeout = limits.network_timeout_s
    auth = auth or GitAuth()
    remote_config = (*network, *auth.config)
    if dest.exists() and _is_our_clone(dest):
        origin = git(dest, "config", "--get", "remote.origin.url", ceiling=ceiling)
        if origin != url:
            # The source changed: a fresh clone, never a fetch from the old remote.
            shutil.rmtree(dest)
    elif dest.exists():
        raise FailedPrecondition(f"{dest.name}: the clone directory exists but is no clone")
    tag = branch.startswith(TAG_PREFIX)
    if dest.exists():
        if tag:
            _fetch_tag(
                dest,
                branch,
                timeout=timeout,
                allow_file=allow_file,
                remote_config=remote_config,
                auth=auth,
            )
            return
        git(
            dest,
            *("fetch", "--prune", "--no-tags", "--", "origin"),
            timeout=timeout,
            allow_file=allow_file,
            ceiling=ceiling,
            config=remote_config,
            env=auth.env,
        )
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    # No working tree: files are read from the commit's objects (snapshots.py), and a
    # checkout would run whatever filters the configuration in force defines.
    args = ["clone", "--no-tags", "--quiet", "--no-checkout"]
    if tag:
        # Only the tag's history; its remote-tracking ref is written by _fetch_tag.
        args += ["--single-branch", "--branch", branch[len(TAG_PREFIX) :]]
    elif branch:
        args += ["--branch", branch]
    try:
        git(
            None,
            *args,
            "--",
            url,
            str(dest),
            timeout=timeout,
            allow_file=allow_file,
            config=remote_config,
            env=auth.env,
        )
        if tag:
            _fetch_tag(
                dest,
                branch,
                timeout=timeout,
                allow_file=allow_file,
                remote_config=remote_config,
                auth=auth,
            )
    except GitError:
        shutil.rmtree(dest, ignore_errors=True)  # a half-made clone is never reused
        raise


def _fetch_tag(
    dest: Path,
    tag: str,
    *,
    timeout: float,
    allow_file: bool,
    remote_config: Sequence[str],
    auth: GitAuth,
) -> None:
    """Fetches the tag `tag` (`refs/tags/<name>`, checked) into the remote-tracking ref
    `refs/remotes/origin/refs/tags/<name>`, forced: a tag moved on the source moves here
    too. Only that refspec is fetched, so the default one cannot prune it."""
    git(
        dest,
        *("fetch", "--no-tags", "--force", "--", "origin", f"+{tag}:refs/remotes/origin/{tag}"),
        timeout=timeout,
        allow_file=allow_file,
        ceiling=dest.parent,
        config=remote_config,
        env=auth.env,
    )


def materialize(
    source: str,
    slug: str,
    branch: str,
    data_dir: Path,
    *,
    local: LocalPolicy | None = None,
    limits: GitLimits | None = None,
    network: Sequence[str] = (),
    auth: GitAuth | None = None,
) -> Checkout:
    """Resolves a source to a commit in a clone under the data dir, or a plain directory.

    `source` and `branch` are checked again here (source_policy), and a local source
    against `local` when given, so nothing reaches git unchecked whoever calls this. A
    local git repository is cloned like a remote, over `file://` (its branch: the one asked
    for, else the one checked out there), so the index is the commit and never the working
    tree, its uncommitted changes, its links or its configuration. `network`: the git
    configuration the source policy returned for a remote source (its https fetches
    pinned to the addresses it checked, no proxy); `auth`: the remote's credential
    (indexing/credentials.py). Clones live under `<data_dir>/repos`, made private to the
    service's user (mode 0700): they may hold private code.
    """
    limits = limits or GitLimits()
    checked = parse_source(source)
    branch = check_branch(branch)
    _private_clones(data_dir)
    if checked.kind == "remote":
        dest = clone_dir(data_dir, slug)
        _clone_or_update(
            checked.text,
            dest,
            branch,
            allow_file=False,
            limits=limits,
            network=network,
            auth=auth,
        )
        return _git_checkout(dest, "url", branch)
    assert checked.path is not None
    path = _local_directory(checked.path, local)
    if checked.kind == "file_url":
        dest = clone_dir(data_dir, slug)
        _clone_or_update(path.as_uri(), dest, branch, allow_file=True, limits=limits)
        return _git_checkout(dest, "url", branch)
    if git_toplevel(path) != path:
        if branch:
            raise FailedPrecondition(f"{source} is not a git repository; it has no branches")
        return Checkout(path, "dir", "", "")
    if not branch:
        try:
            branch = check_branch(git(path, "symbolic-ref", "--short", "-q", "HEAD"))
        except GitError as err:
            raise FailedPrecondition(
                f"{source} has no branch checked out (a detached HEAD); name one to index"
            ) from err
    full = branch if branch.startswith(TAG_PREFIX) else f"refs/heads/{branch}"
    try:
        git(path, "rev-parse", "-q", "--verify", f"{full}^{{commit}}")
    except GitError as err:
        raise FailedPrecondition(
            f"{source} has no commit on branch {branch!r}: only committed files are indexed"
        ) from err
    dest = clone_dir(data_dir, slug)
    _clone_or_update(path.as_uri(), dest, branch, allow_file=True, limits=limits)
    return _git_checkout(dest, "git", branch)


def _private_clones(data_dir: Path) -> None:
    root = repos_root(data_dir)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if root.stat().st_mode & 0o077:
        root.chmod(0o700)  # made by an older release with the umask's mode


def _local_directory(path: Path, local: LocalPolicy | None) -> Path:
    if local is not None:
        # The request was checked already; this catches a path that changed since (a
        # symlink swapped into the data directory) and direct callers.
        return local.check_directory(path, admin=True)
    resolved = path.expanduser().resolve()
    if not resolved.is_dir():
        raise InvalidArgument(f"source {str(path)!r} is neither a directory nor a git URL")
    return resolved


def _git_checkout(dest: Path, kind: str, branch: str) -> Checkout:
    """The clone's branch and the commit it points at (the fetched remote-tracking ref, so
    nothing is checked out); no commit when the repository has none yet."""
    ceiling = dest.parent
    target = branch or _default_branch(dest, ceiling)
    try:
        commit = git(
            dest,
            "rev-parse",
            "-q",
            "--verify",
            f"refs/remotes/origin/{target}^{{commit}}",
            ceiling=ceiling,
        )
    except GitError:
        commit = ""  # a repository without commits yet
    return Checkout(dest, kind, target, commit)


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str  # relative, '/'-separated
    size: int
    content_hash: str  # sha256 of the bytes
    blob: str = ""  # the git blob id, for a git source (snapshots.GitSnapshot)


@dataclass
class Listing:
    files: list[SourceFile]
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class SkipRules:
    max_file_bytes: int = 1_000_000


def _vendored(path: str) -> bool:
    return any(part in VENDORED_DIRS for part in path.split("/")[:-1])


def _looks_minified(path: str, data: bytes) -> bool:
    lowered = path.lower()
    if lowered.endswith(_MINIFIED_SUFFIXES):
        return True
    if lowered.endswith((".js", ".mjs", ".cjs", ".css")):
        return any(len(line) > _MINIFIED_LINE for line in data.split(b"\n", 50)[:50])
    return False


def skip_reason_by_name(path: str) -> str | None:
    """Reasons visible from the path alone (no read needed)."""
    name = path.rsplit("/", 1)[-1]
    if _vendored(path):
        return "vendored"
    if name in LOCK_FILES or name.endswith(".lock"):
        return "lockfile"
    if path.lower().endswith(_MINIFIED_SUFFIXES):
        return "minified"
    return None


def content_skip_reason(path: str, data: bytes) -> str | None:
    """Reasons visible from a file's bytes: nothing to index, or not text."""
    if not data.strip():
        return "empty"
    if b"\0" in data:  # PostgreSQL text cannot hold NUL, wherever it sits
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    if _looks_minified(path, data):
        return "minified"
    return None


def walk_directory(root: Path, skipped: Counter[str]) -> list[str]:
    """Every file under a plain directory; .gitignore files there are honoured."""
    paths: list[str] = []
    specs: dict[str, pathspec.GitIgnoreSpec] = {}
    for current, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(current, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if ".gitignore" in files:
            lines = (Path(current) / ".gitignore").read_text(errors="replace").splitlines()
            specs[rel_dir] = pathspec.GitIgnoreSpec.from_lines(lines)

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs.items():
                if base and not rel.startswith(base + "/"):
                    continue
                inner = rel[len(base) + 1 :] if base else rel
                if spec.match_file(inner + ("/" if is_dir else "")):
                    return True
            return False

        kept_dirs = []
        for name in sorted(dirs):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name == ".git":
                continue
            if name in VENDORED_DIRS:
                skipped["vendored"] += 1  # a pruned tree counts once
            elif ignored(rel, True):
                skipped["gitignored"] += 1
            else:
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(files):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if ignored(rel, False):
                skipped["gitignored"] += 1
            else:
                paths.append(rel)
    return paths

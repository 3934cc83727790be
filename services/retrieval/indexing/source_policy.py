"""What a caller may name as a source, a branch or a slug, checked before any git process
or file system access.

A repository's source, branch and slug reach git's command line and the data directory,
so each is validated here at the boundary:

- text: no leading `-` (it would be read as an option), no control characters, bounded;
- sources: a URL with an allowed scheme (https, ssh, git; `user@host:path` is ssh), or a
  server path / `file://` URL, which the local-source policy must allow; git's
  `transport::address` remote-helper syntax (`ext::`, `fd::`, ...) is refused outright;
- branches: a conservative ref-name pattern, confirmed by `git check-ref-format --branch`;
- slugs: lower-case segments of `[a-z0-9][a-z0-9._-]*`, so no `.` or `..` segment exists,
  and the clone directory they name is checked to resolve inside `<data_dir>/repos`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from retrieval.indexing.git import GitError, run_git
from svckit.errors import FailedPrecondition, InvalidArgument, PermissionDenied

MAX_SOURCE_CHARS = 4096
MAX_BRANCH_CHARS = 255
MAX_SLUG_CHARS = 300
REMOTE_SCHEMES = ("https", "ssh", "git")

# C0 controls, DEL and the C1 range: nothing a URL, a path or a ref name needs.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# `<transport>::<address>` makes git run git-remote-<transport> (ext:: runs a shell).
_REMOTE_HELPER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::")
# git reads `[user@]host:path` as ssh when the colon comes before any slash.
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^@/:]+):(?P<path>.*)$")
_HOST = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._%+-]*$")
_BRANCH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/+-]*$")
_SLUG_SEGMENT = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

SourceKind = Literal["remote", "file_url", "path"]
LocalSourcesPolicy = Literal["admin", "any"]


def check_text(raw: str, what: str, max_chars: int) -> str:
    """`raw` without surrounding spaces, once it cannot be mistaken for an option or smuggle
    a line (control characters are refused, not stripped)."""
    if len(raw) > max_chars:
        raise InvalidArgument(f"{what} is longer than {max_chars} characters")
    if _CONTROL.search(raw):
        raise InvalidArgument(f"{what} must not contain control characters or newlines")
    value = raw.strip(" ")
    if value.startswith("-"):
        raise InvalidArgument(f"{what} must not start with '-'")
    return value


@dataclass(frozen=True)
class Source:
    """A validated source: `text` is what is stored and handed to git."""

    text: str
    kind: SourceKind  # remote URL, file:// URL (cloned), or a server path (read in place)
    path: Path | None = None  # the server path of a local source, not yet resolved

    @property
    def is_local(self) -> bool:
        return self.kind != "remote"


def _remote_url(raw: str) -> Source:
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as err:
        raise InvalidArgument(f"source {raw!r} is not a valid URL: {err}") from None
    host = parts.hostname or ""
    if not _HOST.match(host):
        raise InvalidArgument(f"source {raw!r} needs a host name (letters, digits, '.', '-')")
    if parts.username is not None and not _USER.match(unquote(parts.username)):
        raise InvalidArgument(f"source {raw!r} has an invalid user name")
    if not parts.path.strip("/"):
        raise InvalidArgument(f"source {raw!r} names no repository path")
    if any(c.isspace() for c in raw):
        raise InvalidArgument(f"source {raw!r} must not contain spaces")
    return Source(raw, "remote")


def parse_source(raw: str) -> Source:
    """Classifies and checks a source's syntax; touches nothing on disk."""
    value = check_text(raw, "source", MAX_SOURCE_CHARS)
    if not value:
        raise InvalidArgument("source is required (a git URL or a path on the server)")
    if _REMOTE_HELPER.match(value):
        raise InvalidArgument(
            f"source {value!r} uses git's transport::address syntax, which is not allowed; "
            "use an https, ssh or git URL"
        )
    if "://" in value:
        scheme = value.split("://", 1)[0].lower()
        if scheme == "file":
            parts = urlsplit(value)
            if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
                raise InvalidArgument(f"source {value!r}: a file URL names a local absolute path")
            return Source(value, "file_url", Path(unquote(parts.path)))
        if scheme not in REMOTE_SCHEMES:
            raise InvalidArgument(
                f"source {value!r}: the URL scheme {scheme!r} is not allowed; use https, ssh or git"
            )
        return _remote_url(value)
    scp = _SCP_LIKE.match(value)
    if scp and not value.startswith(("/", "~", ".")):
        user, host, path = scp.group("user"), scp.group("host"), scp.group("path")
        if not _HOST.match(host) or (user is not None and not _USER.match(user)):
            raise InvalidArgument(f"source {value!r}: not a valid user@host:path ssh address")
        if not path or path.startswith("-") or any(c.isspace() for c in value):
            raise InvalidArgument(f"source {value!r}: not a valid user@host:path ssh address")
        return Source(value, "remote")
    if not value.startswith(("/", "~")):
        # Neither a URL nor an absolute path: a relative path would be read from the
        # service's working directory, which no caller can see.
        raise InvalidArgument(
            f"source {value!r} is not an https, ssh or git URL, user@host:path, or an "
            "absolute path on the server"
        )
    return Source(value, "path", Path(value))


def check_branch(raw: str) -> str:
    """A branch name git will take as a branch and nothing else ('' means the default)."""
    value = check_text(raw, "branch", MAX_BRANCH_CHARS)
    if not value:
        return ""
    bad = (
        not _BRANCH.match(value)
        or ".." in value
        or "//" in value
        or value.endswith(("/", ".", ".lock"))
        or any(part.startswith(".") for part in value.split("/"))
    )
    if not bad:
        try:
            run_git(["check-ref-format", "--branch", value], timeout_s=10)
        except GitError:
            bad = True
    if bad:
        raise InvalidArgument(
            f"branch {value!r} is not a valid branch name (letters, digits, '.', '_', '-', "
            "'+', '/'; no '..')"
        )
    return value


def check_slug(raw: str) -> str:
    """A normalised slug: host/owner/name, lower case, segments of [a-z0-9][a-z0-9._-]*."""
    value = check_text(raw, "slug", MAX_SLUG_CHARS).strip("/").lower()
    segments = value.split("/")
    if len(segments) < 3 or not all(_SLUG_SEGMENT.match(s) for s in segments):
        raise InvalidArgument(
            f"slug {raw!r} must look like host/owner/name: at least three segments of "
            "lower-case letters, digits, '.', '_' and '-', each starting with a letter or digit"
        )
    return value


@dataclass(frozen=True)
class LocalPolicy:
    """Who may read the server's own file system through indexing, and where.

    `mode` "admin": only admin keys name server paths (the shared-deployment default);
    "any": every key may (a single-user laptop). `roots`, when set, are the directories
    such paths must lie under. Whatever the mode, the data directory (clones, the admin
    key, the embedded database) is never a source: not itself, nothing in it, nothing
    above it.
    """

    mode: LocalSourcesPolicy
    data_dir: Path
    roots: tuple[Path, ...] = ()

    def require_allowed(self, admin: bool) -> None:
        if self.mode == "admin" and not admin:
            raise PermissionDenied(
                "indexing a path on the server needs an admin key; index a git URL "
                "(https, ssh, git) or upload the documents instead"
            )

    def check_directory(self, raw: str | Path, *, admin: bool, what: str = "source") -> Path:
        """The resolved directory, once the caller may read it; symlinks are resolved first
        so a link cannot lead into the data directory."""
        self.require_allowed(admin)
        path = Path(raw).expanduser()
        if not path.is_absolute():
            raise InvalidArgument(f"{what} {str(raw)!r}: a path on the server must be absolute")
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            raise InvalidArgument(f"{what} {str(raw)!r} cannot be resolved") from None
        # Where it leads is checked before whether it exists, so nothing is learnt about
        # the data directory's contents.
        data = self.data_dir.resolve()
        if resolved.is_relative_to(data) or data.is_relative_to(resolved):
            raise PermissionDenied(
                f"{what} {str(raw)!r} is the service's data directory, lies inside it or "
                "contains it; it cannot be indexed"
            )
        if self.roots and not any(resolved.is_relative_to(r.resolve()) for r in self.roots):
            raise PermissionDenied(
                f"{what} {str(raw)!r} is outside the directories allowed for local sources "
                "(RETRIEVAL_LOCAL_ROOTS)"
            )
        if not resolved.is_dir():
            raise InvalidArgument(f"{what} {str(raw)!r} is neither a directory nor a git URL")
        return resolved


def repos_root(data_dir: Path) -> Path:
    return data_dir / "repos"


def clone_path(data_dir: Path, slug: str) -> Path:
    """Where `slug` is cloned, after checking it stays inside `<data_dir>/repos` and does
    not fall inside another repository's clone."""
    slug = check_slug(slug)
    root = repos_root(data_dir).resolve()
    target = (root / slug).resolve()
    if not target.is_relative_to(root) or target == root:
        raise InvalidArgument(f"slug {slug!r} does not name a directory inside the clones")
    for parent in target.relative_to(root).parents:
        if parent != Path(".") and (root / parent / ".git").exists():
            raise FailedPrecondition(
                f"slug {slug!r} would be cloned inside the clone of {parent.as_posix()!r}"
            )
    return target

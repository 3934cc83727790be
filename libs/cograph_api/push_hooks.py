"""What the gateway's push webhooks and retrieval's SyncSource share: the identity the
gateway calls with, and which repository a git URL names.

A push event names its repository by several URLs (GitHub: `clone_url`, `ssh_url`,
`html_url`; GitLab: `git_http_url`, `git_ssh_url`, `web_url`), and a repository was
indexed from one URL of its own choosing. `repository_key` reduces each to the same key,
so that the forms of one repository meet and nothing else does:

- a remote URL (`https`, `http`, `ssh`, `git`, or scp-like `user@host:path`) becomes
  `host/path`: the scheme, the user and the port dropped, the host in lower case without
  a trailing dot, the path without its surrounding slashes and one trailing `.git`, in
  lower case (GitHub and GitLab name repositories case-insensitively);
- a server path or `file://` URL becomes `file://` and the absolute path, as given.

Keys are compared whole: `github.com/acme/billing` never matches `github.com/acme/billing-old`
or `evil.example/github.com/acme/billing`. Anything a parser could read two ways (more than
one `@`, backslashes, empty, `.` or `..` segments, a query or fragment, control characters,
spaces, non-ASCII hosts, IPv6 literals) has no key, and names nothing.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final
from urllib.parse import quote, unquote, urlsplit

# The principal the gateway's webhook routes call SyncSource as, and the only one
# retrieval lets call it. No API key can have it: key names and principals match
# limits.KEY_NAME_PATTERN, which has no `/`.
WEBHOOK_PRINCIPAL: Final = "cograph/webhooks"

# One SyncSource names at most this many keys, each at most this long.
SYNC_KEYS_MAX: Final = 8
SYNC_KEY_MAX_CHARS: Final = 2048

_SCHEMES: Final = frozenset({"https", "http", "ssh", "git", "git+ssh", "ssh+git"})
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^@/:]+):(?P<path>.*)$")
# git's transport::address syntax (`ext::sh -c ...`, `fd::0`): no repository's URL.
_TRANSPORT = re.compile(r"^[A-Za-z0-9+.-]+::")
_HOST = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Not in a remote URL's key: what one parser reads as part of the path and another as a
# separator, and white space.
_REMOTE_UNSAFE = re.compile(r"[\s\\?#]")


def _remote_key(host: str | None, path: str) -> str | None:
    if not host or _REMOTE_UNSAFE.search(path):
        return None
    host = host.lower().rstrip(".")
    if not _HOST.match(host) or ".." in host:
        return None
    path = path.strip("/")
    if path.lower().endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    if not path or any(s in ("", ".", "..") for s in path.split("/")):
        return None
    return f"{host}/{path.lower()}"


def _local_key(path: str) -> str | None:
    """`file://` and the absolute path, percent-encoded (so a key has no spaces)."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        return None
    if any(s in (".", "..") for s in path.split("/")):
        return None
    return "file://" + quote(posixpath.normpath(path), safe="/")


def repository_key(url: str) -> str | None:
    """The key of the repository `url` names (see the module docstring), or None."""
    value = url.strip()
    if not value or len(value) > SYNC_KEY_MAX_CHARS or _CONTROL.search(value):
        return None
    if value.startswith("/"):
        return _local_key(value)
    if not value.isascii() or _REMOTE_UNSAFE.search(value):
        return None
    if "://" in value:
        scheme = value.split("://", 1)[0].lower()
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError on a malformed port
        except ValueError:
            return None
        if scheme == "file":
            if parts.netloc not in ("", "localhost"):
                return None
            return _local_key(unquote(parts.path))
        if scheme not in _SCHEMES or parts.netloc.count("@") > 1 or "[" in parts.netloc:
            return None
        return _remote_key(parts.hostname, parts.path)
    scp = _SCP_LIKE.match(value)
    if scp is None or value.startswith(("~", ".")) or _TRANSPORT.match(value):
        return None
    return _remote_key(scp.group("host"), scp.group("path"))


def is_repository_key(key: str) -> bool:
    """Whether `key` is a key as repository_key makes them (what SyncSource accepts)."""
    if not key or len(key) > SYNC_KEY_MAX_CHARS:
        return False
    if key.startswith("file://"):
        return repository_key(key) == key
    host = key.split("/", 1)[0]
    return "@" not in host and ":" not in host and repository_key("https://" + key) == key

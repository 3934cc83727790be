"""What a repository's source looks like to whoever reads it, and text scrubbed of what it
must not show.

A source is returned to every key that may read the repository, and git's messages (a
failed clone, a freshness lookup) quote it. So:

- a secret never stays in a source: a password in the URL's userinfo, or a token standing
  as the user name (`https://ghp_...@github.com/...`), is refused on the way in
  (source_policy.parse_source) and stripped from a source stored by an older release
  (`strip_secrets`) before it is used or shown;
- an admin sees the source without its secret (`admin_view`);
- any other key sees it without userinfo, and a source on the server's file system (a
  path or a file:// URL) as `local`: server paths are the operator's (`reader_view`);
- text that quotes a source (git's errors, freshness details, job errors) gets the same
  treatment (`scrub`), and every URL's userinfo is removed from it whatever it says.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

# What a reader sees of a source on the server's file system.
LOCAL_SOURCE = "local"

# `scheme://userinfo@`: what is between `//` and the `@` that ends the authority.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s'\"]*)@")
# `user@host:path` (ssh's scp-like form).
_SCP_LIKE = re.compile(r"^(?P<user>[^@/:]+)@(?P<rest>[^@/:]+:.*)$")
# An absolute path standing alone in text (not the path of a URL: `host/x` or `://`).
_SERVER_PATH = re.compile(r"(?<![\w:/.~@-])/[^\s'\"]+")
# Prefixes of the tokens GitHub, GitLab and Bitbucket issue.
TOKEN_PREFIXES = (
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glptt-",
    "gloas-",
    "glrt-",
    "ATBB",
    "ATCTT",
)
# A user name this long of only token characters is a token, not a name.
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9_-]{32,}$")


def looks_like_token(user: str) -> bool:
    """Whether a URL's user name is a token (`ghp_...`, `glpat-...`, 32+ characters of
    letters, digits, '_' and '-'), which git would send as a secret."""
    name = unquote(user)
    return name.startswith(TOKEN_PREFIXES) or bool(_TOKEN_LIKE.match(name))


def secret_in_userinfo(userinfo: str) -> bool:
    """Whether a URL's userinfo holds a secret: a password (anything after ':') or a
    token as the user name."""
    return ":" in userinfo or looks_like_token(userinfo)


def _userinfo(source: str) -> tuple[str, str, str] | None:
    """(before, userinfo, after) of a URL source with userinfo; None without."""
    scheme, sep, rest = source.partition("://")
    if not sep:
        return None
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not at:
        return None
    return scheme + sep, userinfo, host + slash + path


def has_secret(source: str) -> bool:
    parts = _userinfo(source.strip())
    return parts is not None and secret_in_userinfo(parts[1])


def strip_secrets(source: str) -> str:
    """`source` without a password or token in its userinfo (a plain user name stays):
    `https://deploy:pw@host/r` -> `https://deploy@host/r`, `https://ghp_x@host/r` ->
    `https://host/r`."""
    parts = _userinfo(source)
    if parts is None or not secret_in_userinfo(parts[1]):
        return source
    before, userinfo, after = parts
    user = userinfo.split(":", 1)[0]
    keep = "" if not user or looks_like_token(user) else user + "@"
    return before + keep + after


def is_server_source(source: str) -> bool:
    """Whether `source` names the server's file system: a path or a file:// URL."""
    value = source.strip()
    if value.lower().startswith("file:"):
        return True
    return "://" not in value and not _SCP_LIKE.match(value) and ":" not in value.split("/")[0]


def admin_view(source: str) -> str:
    return strip_secrets(source)


def reader_view(source: str) -> str:
    """`source` as a key that is not an admin sees it: no userinfo, no server path."""
    if is_server_source(source):
        return LOCAL_SOURCE
    parts = _userinfo(source)
    if parts is not None:
        return parts[0] + parts[2]
    scp = _SCP_LIKE.match(source)
    return scp.group("rest") if scp else source


def view(source: str, *, admin: bool) -> str:
    return admin_view(source) if admin else reader_view(source)


def without_userinfo(text: str) -> str:
    """`text` with the userinfo of every URL in it removed (git quotes URLs in errors)."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme"), text)


def scrub(text: str, source: str, *, admin: bool) -> str:
    """`text` (an error or a detail about `source`) fit to show: `source` written as the
    viewer sees it, no URL userinfo, and for a key that is not an admin no server path."""
    if not text:
        return text
    shown = view(source, admin=admin)
    forms = {source, strip_secrets(source)}
    if is_server_source(source) and source:
        path = unquote(source[len("file://") :]) if source.startswith("file://") else source
        forms.add(path)
    for form in sorted((f for f in forms if f), key=len, reverse=True):
        text = text.replace(form, shown)
    text = without_userinfo(text)
    if not admin:
        text = _SERVER_PATH.sub("<path>", text)
    return text

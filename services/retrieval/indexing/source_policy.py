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
  and the clone directory they name is checked to resolve inside `<data_dir>/repos`;
- remote hosts (HostPolicy): an optional allow-list of host patterns, and no address that
  is not public (loopback, private, link-local such as 169.254.169.254, ...) unless the
  caller may use private sources; https fetches are pinned to the addresses checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from retrieval.indexing.git import GitError, run_git
from retrieval.indexing.redaction import has_secret, looks_like_token
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
    if "\\" in raw or parts.netloc.count("@") > 1:
        # Parsers disagree about such authorities (which '@' ends the user name): what is
        # checked must be the host git connects to.
        raise InvalidArgument(f"source {raw!r} has an ambiguous user@host part")
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


# The refusal of a source holding a secret; it never quotes the source.
SECRET_IN_SOURCE = (
    "source holds a password or token in its user part; a source is shown to every key "
    "that may read the repository, so it must hold no secret: register the credential "
    "with the operator (`cograph credentials add`, see docs/credentials.md) and give the "
    "URL without it"
)


def parse_source(raw: str) -> Source:
    """Classifies and checks a source's syntax; touches nothing on disk."""
    value = check_text(raw, "source", MAX_SOURCE_CHARS)
    if not value:
        raise InvalidArgument("source is required (a git URL or a path on the server)")
    if has_secret(value):
        # Before any message below could quote it.
        raise InvalidArgument(SECRET_IN_SOURCE)
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
        if user is not None and looks_like_token(user):
            raise InvalidArgument(SECRET_IN_SOURCE)
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
    above it; nor is any directory in `protected` (the git credentials directory, which
    may lie elsewhere).
    """

    mode: LocalSourcesPolicy
    data_dir: Path
    roots: tuple[Path, ...] = ()
    protected: tuple[Path, ...] = ()

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
        for kept in (p.resolve() for p in self.protected):
            if resolved.is_relative_to(kept) or kept.is_relative_to(resolved):
                raise PermissionDenied(
                    f"{what} {str(raw)!r} is the service's credentials directory, lies inside "
                    "it or contains it; it cannot be indexed"
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


# ------------------------------------------------------------------ remote hosts

PrivateSourcesPolicy = Literal["admin", "any", "none"]
PRIVATE_SOURCES_POLICIES: tuple[PrivateSourcesPolicy, ...] = ("admin", "any", "none")
DEFAULT_PORTS = {"https": 443, "ssh": 22, "git": 9418}
# How long a source's host may take to resolve before the source is refused.
RESOLVE_TIMEOUT_S = 5.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses it resolves to, as text; the default asks the system.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

# A last label of digits or 0x-hex makes a host an IPv4 address to the C library
# (`2130706433`, `0x7f.1`, `127.1`, `0177.0.0.1`): only the dotted-decimal form is taken.
_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
# Ranges whose addresses stand for an IPv4 address that a gateway or tunnel reaches.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives `host` (what git would connect to)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_public_address(address: IPAddress) -> bool:
    """Whether `address` is one on the public internet.

    `is_global` alone is not enough: it holds for multicast, for the deprecated site-local
    IPv6 range and for IPv6 forms that carry an IPv4 address (mapped, 6to4, Teredo, NAT64),
    whose embedded address is what a connection reaches and is classified instead.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded: list[ipaddress.IPv4Address] = []
        if address.ipv4_mapped is not None:
            return is_public_address(address.ipv4_mapped)
        if address.sixtofour is not None:
            embedded.append(address.sixtofour)
        if address.teredo is not None:
            embedded.extend(address.teredo)
        if any(address in net for net in _NAT64):
            embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        if any(not is_public_address(e) for e in embedded) or address.is_site_local:
            return False
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def _parse_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 scope is not an address
    except ValueError:
        return None


def normalize_host(raw: str) -> tuple[str, IPAddress | None]:
    """A host as compared and resolved: lower case, no trailing dot, no brackets; with the
    address it is when it is a literal. Numeric IPv4 forms other than dotted decimal, zone
    ids and non-ASCII names are refused (InvalidArgument)."""
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.endswith("."):
        host = host[:-1]
    if ":" in host:
        if "%" in host:
            raise InvalidArgument(f"host {raw!r}: an IPv6 zone is not allowed")
        try:
            address6 = ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidArgument(f"host {raw!r} is not a valid IPv6 address") from None
        return str(address6), address6
    if not host.isascii() or not _HOST.match(host):
        raise InvalidArgument(
            f"host {raw!r} must be an ASCII host name (letters, digits, '.', '-')"
        )
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            address = None
        if address is None or str(address) != host:
            raise InvalidArgument(
                f"host {raw!r} reads as an IPv4 address; write it as four decimal numbers "
                "(a.b.c.d, no leading zeros)"
            )
        return host, address
    return host, None


@dataclass(frozen=True)
class RemoteHost:
    """Where a remote source connects: scheme, normalised host, port."""

    scheme: str  # https | ssh | git
    host: str
    port: int
    address: IPAddress | None  # the host, when it is a literal address

    @property
    def is_local_name(self) -> bool:
        """`localhost` and `*.localhost`, which resolvers (curl's too) answer with
        loopback addresses without asking DNS."""
        return self.host == "localhost" or self.host.endswith(".localhost")


def remote_host(source: Source | str) -> RemoteHost:
    """The host a remote source names, as git will connect to it (InvalidArgument when
    it cannot be told with certainty)."""
    checked = parse_source(source) if isinstance(source, str) else source
    if checked.kind != "remote":
        raise InvalidArgument(f"source {checked.text!r} is not a remote URL")
    text = checked.text
    if "://" not in text:
        scp = _SCP_LIKE.match(text)
        assert scp is not None  # parse_source classified it as user@host:path
        host, address = normalize_host(scp.group("host"))
        return RemoteHost("ssh", host, DEFAULT_PORTS["ssh"], address)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    host, address = normalize_host(parts.hostname or "")
    return RemoteHost(scheme, host, parts.port or DEFAULT_PORTS[scheme], address)


@dataclass(frozen=True)
class HostPattern:
    """One entry of RETRIEVAL_SOURCE_HOSTS: `git.example.com`, `*.example.com` (any name
    below example.com, not example.com itself), an address, each with an optional
    `:port` (any port without one)."""

    host: str
    wildcard: bool = False
    port: int | None = None

    def matches(self, remote: RemoteHost) -> bool:
        if self.port is not None and remote.port != self.port:
            return False
        if self.wildcard:
            return remote.host.endswith("." + self.host)
        return remote.host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return ("*." if self.wildcard else "") + host + (f":{self.port}" if self.port else "")


def parse_host_pattern(raw: str) -> HostPattern:
    """A HostPattern from its text; ValueError says what is wrong with it."""
    text = raw.strip()
    port: int | None = None
    match = re.match(r"^(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>\d{1,5}))?$", text)
    if not match:
        raise ValueError(f"{raw!r} is not host, *.domain or [ipv6], with an optional :port")
    if match.group("port") is not None:
        port = int(match.group("port"))
        if not 0 < port < 65536:
            raise ValueError(f"{raw!r}: the port must be between 1 and 65535")
    host_text = match.group("host")
    wildcard = host_text.startswith("*.")
    if wildcard:
        host_text = host_text[2:]
    try:
        host, address = normalize_host(host_text)
    except InvalidArgument as err:
        raise ValueError(err.message) from None
    if wildcard and (address is not None or "." not in host):
        raise ValueError(f"{raw!r}: a wildcard needs a domain with at least two labels")
    return HostPattern(host, wildcard, port)


@dataclass(frozen=True)
class HostPolicy:
    """Where a remote source may point, checked before git connects to it.

    `hosts` (RETRIEVAL_SOURCE_HOSTS): when not empty, every remote source, whoever names
    it, must match one of them. `private` (RETRIEVAL_PRIVATE_SOURCES): who may name a host
    that is, or resolves to, an address that is not public: "admin" keys only (the
    default), "any" key, or "none".

    A caller that may not use private sources has the host resolved (within `timeout_s`)
    and every address checked; a host that does not resolve is refused the same way, so
    the answer does not tell which internal names exist. The check returns git
    configuration that holds git to what was checked: for https, the addresses (curl's
    resolve list, so a second lookup cannot answer differently) and no proxy (a proxy
    would resolve the name itself). ssh and git:// cannot be pinned, so such a caller may
    use them only for hosts the allow-list names.
    """

    private: PrivateSourcesPolicy = "admin"
    hosts: tuple[HostPattern, ...] = ()
    resolver: Resolver | None = None  # None: the system resolver
    timeout_s: float = RESOLVE_TIMEOUT_S

    def allows_private(self, admin: bool) -> bool:
        return self.private == "any" or (self.private == "admin" and admin)

    async def check(self, source: Source | str, *, admin: bool) -> tuple[str, ...]:
        """Raises unless the caller may fetch from `source`; else the git configuration
        (`key=value` entries for `-c`) its fetches must run with. Local sources are the
        local policy's and pass here unchanged."""
        checked = parse_source(source) if isinstance(source, str) else source
        if checked.kind != "remote":
            return ()
        remote = remote_host(checked)
        text = checked.text
        if self.hosts and not any(p.matches(remote) for p in self.hosts):
            raise PermissionDenied(
                f"source {text!r}: {remote.host}:{remote.port} is not among the hosts sources "
                "may name (RETRIEVAL_SOURCE_HOSTS)"
            )
        if self.allows_private(admin):
            return ()
        addresses = await self._public_addresses(remote, text)
        if remote.scheme != "https":
            if not self.hosts:
                raise PermissionDenied(
                    f"source {text!r}: ssh and git:// sources can only name hosts listed in "
                    "RETRIEVAL_SOURCE_HOSTS (their connections cannot be held to the "
                    "addresses checked); use an https URL"
                )
            return ()
        pinned = ",".join(f"[{a}]" if a.version == 6 else str(a) for a in addresses)
        return (f"http.curloptResolve={remote.host}:{remote.port}:{pinned}", "http.proxy=")

    async def _public_addresses(self, remote: RemoteHost, text: str) -> list[IPAddress]:
        addresses: list[IPAddress] = []
        if remote.address is not None:
            addresses = [remote.address]
        elif not remote.is_local_name:
            resolver = self.resolver or system_resolver
            try:
                found = await asyncio.wait_for(
                    resolver(remote.host, remote.port), timeout=self.timeout_s
                )
            except (OSError, TimeoutError, UnicodeError, ValueError):
                found = []
            parsed = [_parse_address(a) for a in found]
            # One unparseable answer counts as a private one: when in doubt, refuse.
            addresses = (
                [] if None in parsed else list(dict.fromkeys(a for a in parsed if a is not None))
            )
        if not addresses or not all(is_public_address(a) for a in addresses):
            who = (
                "only an admin key may name such a host (RETRIEVAL_PRIVATE_SOURCES=admin)"
                if self.private == "admin"
                else "no key may name such a host (RETRIEVAL_PRIVATE_SOURCES=none)"
            )
            raise PermissionDenied(
                f"source {text!r}: {remote.host} does not resolve, or resolves to an address "
                f"that is not public (loopback, private, link-local, ...); {who}"
            )
        return addresses


def private_sources_policy(value: str) -> PrivateSourcesPolicy:
    for policy in PRIVATE_SOURCES_POLICIES:
        if value == policy:
            return policy
    raise ValueError(f"{value!r} is none of {', '.join(PRIVATE_SOURCES_POLICIES)}")

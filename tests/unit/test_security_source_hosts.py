"""Where a remote source may point: the address classification, host normalisation, the
allow-list patterns and the host policy, with a resolver injected (no DNS is asked here),
and the configuration git gets: https pinned to the checked addresses, no proxy, no
redirects. The last tests run real git against listeners on 127.0.0.1."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from retrieval.indexing.freshness import Freshness, HeadProbe, IndexedSource
from retrieval.indexing.git import GitError, git_command, run_git
from retrieval.indexing.source_policy import (
    HostPattern,
    HostPolicy,
    PrivateSourcesPolicy,
    RemoteHost,
    is_public_address,
    normalize_host,
    parse_host_pattern,
    parse_source,
    remote_host,
)
from retrieval.settings import IndexSettings
from svckit.config import ConfigError, Env
from svckit.errors import InvalidArgument, PermissionDenied

# ------------------------------------------------------------------ addresses

NOT_PUBLIC = [
    "127.0.0.1",
    "127.255.255.254",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # CGNAT
    "224.0.0.1",  # multicast: is_global says True
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "192.0.2.1",
    "::1",
    "::",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "fec0::1",  # site-local: is_global says True
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::7f00:1",  # IPv4-compatible
    "2002:7f00:1::",  # 6to4 around 127.0.0.1: is_global says True
    "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
    "64:ff9b::a9fe:a9fe",
    "2001:db8::1",
]
PUBLIC = ["8.8.8.8", "140.82.112.3", "1.1.1.1", "2606:4700::1111", "2a00:1450:4001::1"]


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_non_public_addresses(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


def test_mapped_public_address_is_public() -> None:
    assert is_public_address(ipaddress.ip_address("::ffff:8.8.8.8"))


# ------------------------------------------------------------------ hosts


@pytest.mark.parametrize(
    ("raw", "host", "address"),
    [
        ("GitHub.COM", "github.com", None),
        ("github.com.", "github.com", None),
        ("127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1", "::1"),
        ("[::FFFF:7F00:1]", "::ffff:7f00:1", "::ffff:7f00:1"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example", None),
        ("0x7f.example", "0x7f.example", None),  # a name: its last label is not numeric
    ],
)
def test_hosts_are_normalised(raw: str, host: str, address: str | None) -> None:
    normalised, literal = normalize_host(raw)
    assert normalised == host
    assert (str(literal) if literal else None) == address


@pytest.mark.parametrize(
    "raw",
    [
        "2130706433",  # 127.0.0.1 as one number
        "0x7f000001",
        "0x7f.1",
        "127.1",
        "0177.0.0.1",  # octal
        "127.000.000.001",
        "010.0.0.1",
        "1.2.3.4.5",
        "example.123",
        "bücher.example",
        "[fe80::1%25eth0]",
        "[::1",
        "",
    ],
)
def test_ambiguous_hosts_are_refused(raw: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_host(raw)


@pytest.mark.parametrize(
    ("source", "scheme", "host", "port"),
    [
        ("https://github.com/acme/billing.git", "https", "github.com", 443),
        ("https://GITHUB.com:8443/acme/billing", "https", "github.com", 8443),
        ("ssh://git@example.org:2222/acme/billing.git", "ssh", "example.org", 2222),
        ("git@github.com:acme/billing.git", "ssh", "github.com", 22),
        ("git://127.0.0.1/x", "git", "127.0.0.1", 9418),
        # What the URL connects to, not what its user name says.
        ("https://github.com@127.0.0.1/acme/billing", "https", "127.0.0.1", 443),
        ("https://github.com@169.254.169.254/a/b", "https", "169.254.169.254", 443),
    ],
)
def test_remote_hosts(source: str, scheme: str, host: str, port: int) -> None:
    remote = remote_host(source)
    assert (remote.scheme, remote.host, remote.port) == (scheme, host, port)


@pytest.mark.parametrize(
    "source",
    [
        "https://2130706433/a/b",
        "https://0x7f.1/a/b",
        "https://0x7f000001/a/b",
        "https://127.1/a/b",
        "https://0177.0.0.1/a/b",
        "https://[::1]/a/b",
        "https://[::ffff:127.0.0.1]/a/b",
        "https://localhost./a/b",
        "https://github.com\\@127.0.0.1/a/b",
        "https://a@github.com@127.0.0.1/a/b",
        "https://github.com%40127.0.0.1/a/b",
        "https://bücher.example/a/b",
        "git@0x7f.1:a/b",
        "git@2130706433:a/b",
    ],
)
def test_hostile_hosts_are_refused_as_syntax(source: str) -> None:
    with pytest.raises(InvalidArgument):
        remote_host(source)


# ------------------------------------------------------------------ allow-list patterns


@pytest.mark.parametrize(
    ("pattern", "host", "port", "matches"),
    [
        ("github.com", "github.com", 443, True),
        ("github.com", "api.github.com", 443, False),
        ("github.com", "github.com.evil.net", 443, False),
        ("GitHub.com.", "github.com", 22, True),
        ("*.example.com", "git.example.com", 443, True),
        ("*.example.com", "a.b.example.com", 443, True),
        ("*.example.com", "example.com", 443, False),
        ("*.example.com", "example.com.evil.net", 443, False),
        ("*.example.com", "evilexample.com", 443, False),
        ("*.example.com", "git.example.com.evil.net", 443, False),
        ("git.example.com:8443", "git.example.com", 8443, True),
        ("git.example.com:8443", "git.example.com", 443, False),
        ("10.0.0.5", "10.0.0.5", 9418, True),
        ("10.0.0.5:9418", "10.0.0.5", 22, False),
    ],
)
def test_host_patterns(pattern: str, host: str, port: int, matches: bool) -> None:
    remote = remote_host(f"ssh://git@{host}:{port}/a/b")
    assert parse_host_pattern(pattern).matches(remote) is matches


def test_ipv6_pattern_matches_a_normalised_host() -> None:
    pattern = parse_host_pattern("[0::1]:22")
    assert pattern.matches(RemoteHost("ssh", "::1", 22, ipaddress.IPv6Address("::1")))
    assert str(pattern) == "[::1]:22"


@pytest.mark.parametrize(
    "pattern",
    ["*", "*.com", "*.10.0.0.1", "http://x.com", "x.com/path", "x.com:0", "x.com:99999", "0x7f.1"],
)
def test_bad_host_patterns(pattern: str) -> None:
    with pytest.raises(ValueError):
        parse_host_pattern(pattern)


def test_settings_read_the_host_policy() -> None:
    default = IndexSettings.from_env(Env({}))
    assert default.source_hosts == () and default.private_sources == "admin"
    settings = IndexSettings.from_env(
        Env(
            {
                "RETRIEVAL_SOURCE_HOSTS": "github.com, *.corp.example  git.local:9418",
                "RETRIEVAL_PRIVATE_SOURCES": "none",
            }
        )
    )
    assert settings.source_hosts == (
        HostPattern("github.com"),
        HostPattern("corp.example", wildcard=True),
        HostPattern("git.local", port=9418),
    )
    assert settings.private_sources == "none"
    for name, value in (
        ("RETRIEVAL_SOURCE_HOSTS", "*.com"),
        ("RETRIEVAL_SOURCE_HOSTS", "https://github.com"),
        ("RETRIEVAL_PRIVATE_SOURCES", "some"),
    ):
        with pytest.raises(ConfigError, match=name):
            IndexSettings.from_env(Env({name: value}))


# ------------------------------------------------------------------ the policy


class FakeResolver:
    """Answers from a table; records what was asked. A missing name does not resolve."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = table
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[host]


DNS = {
    "github.com": ["140.82.112.3"],
    "dual.example": ["140.82.112.3", "2606:4700::1111"],
    "metadata.example": ["169.254.169.254"],
    "mixed.example": ["140.82.112.3", "10.0.0.7"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "git.corp.example": ["10.1.2.3"],
    "garbage.example": ["not-an-address"],
}


def policy(private: PrivateSourcesPolicy = "admin", hosts: str = "") -> HostPolicy:
    patterns = tuple(parse_host_pattern(h) for h in hosts.split(",") if h)
    return HostPolicy(private, patterns, resolver=FakeResolver(DNS))


async def test_public_https_is_pinned_to_the_checked_addresses() -> None:
    config = await policy().check("https://GitHub.com/acme/billing.git", admin=False)
    assert config == ("http.curloptResolve=github.com:443:140.82.112.3", "http.proxy=")
    config = await policy().check("https://dual.example:8443/a/b", admin=False)
    assert config == (
        "http.curloptResolve=dual.example:8443:140.82.112.3,[2606:4700::1111]",
        "http.proxy=",
    )


@pytest.mark.parametrize(
    "source",
    [
        "https://127.0.0.1/a/b",
        "https://localhost/a/b",
        "https://git.localhost/a/b",
        "https://169.254.169.254/latest/meta-data",
        "https://github.com@127.0.0.1/a/b",
        "https://metadata.example/a/b",
        "https://mixed.example/a/b",  # one private answer is enough
        "https://mapped.example/a/b",
        "https://git.corp.example/a/b",
        "https://garbage.example/a/b",  # an answer that is not an address
        "https://nxdomain.example/a/b",  # does not resolve: refused alike
        "https://0.0.0.0/a/b",
        "https://100.64.1.1/a/b",
        "https://224.0.0.1/a/b",
    ],
)
async def test_agents_cannot_reach_private_hosts(source: str) -> None:
    with pytest.raises(PermissionDenied, match="not public") as refused:
        await policy().check(source, admin=False)
    assert "only an admin key" in refused.value.message
    # An admin may, under the default, without any lookup and with nothing pinned.
    resolver = FakeResolver(DNS)
    admin_policy = HostPolicy("admin", resolver=resolver)
    assert await admin_policy.check(source, admin=True) == ()
    assert resolver.asked == []
    # Under "none" nobody may; under "any" everybody.
    with pytest.raises(PermissionDenied, match="RETRIEVAL_PRIVATE_SOURCES=none"):
        await policy("none").check(source, admin=True)
    assert await policy("any").check(source, admin=False) == ()


async def test_unresolvable_and_private_answer_alike() -> None:
    async def refusal(host: str) -> str:
        with pytest.raises(PermissionDenied) as refused:
            await policy().check(f"https://{host}/a/b", admin=False)
        return refused.value.message.replace(host, "<host>")

    assert await refusal("git.corp.example") == await refusal("nothing.example")


async def test_a_slow_resolver_is_cut_off() -> None:
    import asyncio

    async def slow(host: str, port: int) -> Sequence[str]:
        await asyncio.sleep(30)
        return ["140.82.112.3"]

    hosts = HostPolicy("admin", resolver=slow, timeout_s=0.2)
    with pytest.raises(PermissionDenied, match="does not resolve"):
        await hosts.check("https://github.com/a/b", admin=False)


async def test_ssh_and_git_need_a_listed_host_unless_private_sources_are_allowed() -> None:
    for source in (
        "git@github.com:acme/billing.git",
        "ssh://github.com/a/b",
        "git://github.com/a/b",
    ):
        with pytest.raises(PermissionDenied, match="RETRIEVAL_SOURCE_HOSTS"):
            await policy().check(source, admin=False)
        assert await policy().check(source, admin=True) == ()
        assert await policy("any").check(source, admin=False) == ()
        # Listed: checked for public addresses, nothing to pin.
        assert await policy(hosts="github.com").check(source, admin=False) == ()
    with pytest.raises(PermissionDenied, match="not public"):
        await policy(hosts="*.corp.example").check("git@git.corp.example:a/b", admin=False)


async def test_the_allow_list_binds_every_key() -> None:
    hosts = policy(hosts="github.com,*.corp.example:443")
    for admin in (True, False):
        for source in (
            "https://gitlab.com/a/b",
            "https://github.com.evil.net/a/b",
            "https://corp.example/a/b",  # the wildcard is for names below it
            "https://git.corp.example:8443/a/b",  # another port
            "https://github.com@127.0.0.1/a/b",
        ):
            with pytest.raises(PermissionDenied, match="RETRIEVAL_SOURCE_HOSTS"):
                await hosts.check(source, admin=admin)
    assert await hosts.check("https://github.com/a/b", admin=False)
    assert await hosts.check("https://git.corp.example/a/b", admin=True) == ()
    # A listed host is still held to public addresses for a key that may not go private.
    with pytest.raises(PermissionDenied, match="not public"):
        await hosts.check("https://git.corp.example/a/b", admin=False)
    # "any" with a list: exactly the listed hosts, private or not.
    listed_any = policy("any", hosts="git.corp.example")
    assert await listed_any.check("https://git.corp.example/a/b", admin=False) == ()
    with pytest.raises(PermissionDenied):
        await listed_any.check("https://github.com/a/b", admin=False)


async def test_local_sources_are_not_the_host_policys() -> None:
    hosts = policy("none", hosts="github.com")
    assert await hosts.check("/srv/git/billing", admin=True) == ()
    assert await hosts.check("file:///srv/git/billing", admin=False) == ()


async def test_hostile_syntax_is_an_invalid_argument() -> None:
    for source in ("https://2130706433/a/b", "https://0x7f.1/a/b", "https://a@b@127.0.0.1/x/y"):
        with pytest.raises(InvalidArgument):
            await policy().check(source, admin=False)
    with pytest.raises(InvalidArgument):
        parse_source("https://a@b@127.0.0.1/x/y")


# ------------------------------------------------------------------ git's command line


def test_git_refuses_redirects_and_takes_the_pin() -> None:
    plain = git_command(["ls-remote", "--", "https://github.com/a/b"])
    assert "http.followRedirects=false" in plain
    assert not any("curloptResolve" in part for part in plain)
    pin = ("http.curloptResolve=github.com:443:140.82.112.3", "http.proxy=")
    pinned = git_command(["ls-remote", "--", "https://github.com/a/b"], config=pin)
    assert pinned[pinned.index(pin[0]) - 1] == "-c"
    assert pinned[pinned.index("http.proxy=") - 1] == "-c"
    # The options come before the subcommand, where git reads them.
    assert pinned.index(pin[0]) < pinned.index("ls-remote")
    assert git_command(["ls-remote"]) == git_command(["ls-remote"], config=())


@contextlib.contextmanager
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP listener on 127.0.0.1 that records each connection and closes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connection, peer = server.accept()
                seen.append(peer[0])
                connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stop.set()
        thread.join()
        server.close()


def test_git_connects_to_the_pinned_address_not_a_lookup_or_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`pinned.invalid` never resolves; with the pin git reaches the listener on 127.0.0.1,
    and a proxy from the environment is not used."""
    with listener() as (port, seen), listener() as (proxy_port, proxied):
        for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy_port}")
        url = f"https://pinned.invalid:{port}/a/b"
        pin = (f"http.curloptResolve=pinned.invalid:{port}:127.0.0.1", "http.proxy=")
        with pytest.raises(GitError):  # the listener speaks no TLS
            run_git(["ls-remote", "--", url], timeout_s=20, config=pin)
        assert seen and not proxied
        # Without the proxy override the environment's proxy would have been asked.
        with pytest.raises(GitError):
            run_git(["ls-remote", "--", url], timeout_s=20, config=pin[:1])
        assert proxied


def test_without_a_pin_the_name_does_not_resolve() -> None:
    with listener() as (port, seen):
        with pytest.raises(GitError, match="resolve"):
            run_git(["ls-remote", "--", f"https://pinned.invalid:{port}/a/b"], timeout_s=20)
        assert not seen


async def test_freshness_obeys_the_host_policy(tmp_path: Path) -> None:
    probe = HeadProbe(timeout_s=5, ttl_s=0, hosts=policy())
    for source in (
        "https://127.0.0.1/a/b",
        "https://localhost/a/b",
        "https://metadata.example/a/b",
        "git://127.0.0.1:1/a/b",
        "git@github.com:a/b.git",
    ):
        check = await probe.check(IndexedSource(source, "url", "main", "0" * 40))
        assert check.freshness is Freshness.UNKNOWN, source
        assert "not looked up" in check.detail, check.detail

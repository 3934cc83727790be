"""Whether an index is behind its source: the indexed commit against the current head of
the indexed branch, looked up when a caller asks.

One code path for every git source: `git ls-remote <source> <ref>` answers for a local
working tree and for a URL alike, reads no objects, and never touches the working tree.
Each lookup is bounded by a timeout (a remote may be slow or gone) and remembered briefly,
so listing many repositories does not reach out to every remote on every call.

A lookup reaches the source's host as an index run does, so it obeys the same host policy
(source_policy.HostPolicy) on the service's own authority, which is that of a key that is
not an admin (no one asked for the lookup): a source the policy refuses is not looked up
and its freshness is `unknown`, with the refusal as the detail. The sync (indexing/sync.py)
looks up heads to re-index what moved with that same authority over remote hosts, since a
key with a write grant may have set the source (`admin` stays False there). A remote
lookup uses the source's registered credential (indexing/credentials.py), as a fetch
would. Details are raw here; the servicer shows them through redaction.scrub.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retrieval.indexing.credentials import GitAuth, GitCredentials
from retrieval.indexing.git import GitError, GitTimeout, run_git_async
from retrieval.indexing.redaction import strip_secrets
from retrieval.indexing.refs import TAG_PREFIX
from retrieval.indexing.source_policy import HostPolicy, check_branch, parse_source
from svckit.errors import FailedPrecondition, InvalidArgument, PermissionDenied

# A head lookup prints one line per matching ref; more than this is not an answer.
_MAX_LS_REMOTE_BYTES = 1024 * 1024


class Freshness(enum.Enum):
    CURRENT = "current"
    STALE = "stale"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class HeadCheck:
    freshness: Freshness
    head_commit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class IndexedSource:
    """What the repositories table says was indexed."""

    source: str
    source_kind: str  # git | url | dir
    branch: str
    commit: str


class HeadLookupError(RuntimeError):
    """The source's head could not be read; the message says why."""


def _ref(branch: str) -> str:
    # A detached checkout is indexed as branch "HEAD"; an indexed tag (indexing/refs.py) is
    # stored by its full name.
    if branch in ("", "HEAD"):
        return "HEAD"
    return branch if branch.startswith(TAG_PREFIX) else f"refs/heads/{branch}"


async def ls_remote(
    source: str,
    branch: str,
    timeout_s: float,
    hosts: HostPolicy | None = None,
    credentials: GitCredentials | None = None,
    *,
    admin: bool = False,
) -> str:
    """The commit `branch` points at in `source` (a path or URL); for a tag
    (`refs/tags/<name>`), the commit it names (an annotated tag peeled).

    The stored source and branch are checked again before git sees them (a row written
    before validation existed must not reach the command line), a remote source against
    `hosts` as a non-admin caller unless `admin` (the policy a stored source was accepted
    under may have changed, and so may its host's addresses), and the lookup goes through
    the service's guarded git runner: `file` transport only for a local source, https
    pinned to the addresses checked, with the source's credential. A secret an older
    release stored in the source is stripped before use.
    """
    try:
        ref = _ref(check_branch(branch) if branch != "HEAD" else branch)
    except InvalidArgument as err:
        raise HeadLookupError(err.message) from None
    patterns = [ref, f"{ref}^{{}}"] if ref.startswith(TAG_PREFIX) else [ref]
    out = await remote_refs(source, patterns, timeout_s, hosts, credentials, admin=admin)
    found = dict(
        (name, sha) for sha, _, name in (line.partition("\t") for line in out.splitlines())
    )
    head = found.get(f"{ref}^{{}}") or found.get(ref)
    if head:
        return head
    raise HeadLookupError(f"the source has no {ref}")


async def remote_refs(
    source: str,
    patterns: Sequence[str],
    timeout_s: float,
    hosts: HostPolicy | None = None,
    credentials: GitCredentials | None = None,
    *,
    admin: bool = False,
    options: Sequence[str] = (),
) -> str:
    """`git ls-remote [options] -- <source> [patterns]`'s output, checked and guarded as
    ls_remote's lookup is (`options` and `patterns` are this service's, never a
    caller's text unchecked: patterns are validated ref names)."""
    try:
        checked = parse_source(strip_secrets(source))
    except InvalidArgument as err:
        raise HeadLookupError(err.message) from None
    config: tuple[str, ...] = ()
    if hosts is not None:
        try:
            config = await hosts.check(checked, admin=admin)
        except (InvalidArgument, PermissionDenied) as err:
            raise HeadLookupError(f"not looked up: {err.message}") from None
    auth = GitAuth(())
    if not checked.is_local:
        try:
            auth = await asyncio.to_thread((credentials or GitCredentials()).auth_for, checked.text)
        except FailedPrecondition as err:
            raise HeadLookupError(f"not looked up: {err.message}") from None
    try:
        out = await run_git_async(
            ["ls-remote", *options, "--", checked.text, *patterns],
            timeout_s=timeout_s,
            allow_file=checked.is_local,
            max_output=_MAX_LS_REMOTE_BYTES,
            config=(*config, *auth.config),
            env=auth.env,
        )
    except GitTimeout:
        raise HeadLookupError(f"the source did not answer within {timeout_s:g}s") from None
    except GitError as err:
        raise HeadLookupError(str(err)) from None
    return out.decode(errors="replace")


def compare(indexed: IndexedSource, head: str) -> HeadCheck:
    if head == indexed.commit:
        return HeadCheck(Freshness.CURRENT, head)
    return HeadCheck(Freshness.STALE, head)


class HeadProbe:
    """Looks up sources' heads with a timeout, a short memory and bounded parallelism.

    `hosts`: the host policy remote lookups obey (see the module docstring), the service's
    configured one. None: lookups are not restricted (tests of local sources).
    `credentials`: the operator's registered credentials (None: none).
    `admin`: the authority lookups have under the host policy (see the module docstring).
    """

    def __init__(
        self,
        timeout_s: float,
        ttl_s: float,
        concurrency: int = 8,
        clock: Callable[[], float] = time.monotonic,
        *,
        hosts: HostPolicy | None = None,
        credentials: GitCredentials | None = None,
        admin: bool = False,
    ) -> None:
        self._hosts = hosts
        self._admin = admin
        self._credentials = credentials
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._clock = clock
        self._gate = asyncio.Semaphore(concurrency)
        # (source, branch) -> (when, head commit or the error's message)
        self._seen: dict[tuple[str, str], tuple[float, str, bool]] = {}

    async def check(self, indexed: IndexedSource) -> HeadCheck:
        if indexed.source_kind == "dir":
            return HeadCheck(Freshness.UNKNOWN, detail="a plain directory has no git head")
        if not indexed.commit:
            return HeadCheck(Freshness.UNKNOWN, detail="no commit was indexed")
        key = (indexed.source, indexed.branch)
        cached = self._seen.get(key)
        if cached is None or self._clock() - cached[0] >= self._ttl_s:
            cached = await self._lookup(key)
        _, value, ok = cached
        return compare(indexed, value) if ok else HeadCheck(Freshness.UNKNOWN, detail=value)

    async def list_refs(self, source: str, *, admin: bool | None = None) -> str:
        """The source's branches and tags as `git ls-remote --heads --tags` prints them,
        within the lookup timeout and bounded parallelism (never remembered: a caller asks
        for it to see what the source has now). `admin`: the authority the host policy
        checks with; the probe's own when None. HeadLookupError says why it failed."""
        async with self._gate:
            return await remote_refs(
                source,
                (),
                self._timeout_s,
                self._hosts,
                self._credentials,
                admin=self._admin if admin is None else admin,
                options=("--heads", "--tags"),
            )

    async def check_all(self, sources: Sequence[IndexedSource]) -> list[HeadCheck]:
        return list(await asyncio.gather(*(self.check(s) for s in sources)))

    async def _lookup(self, key: tuple[str, str]) -> tuple[float, str, bool]:
        async with self._gate:
            try:
                entry = (
                    self._clock(),
                    await ls_remote(
                        *key, self._timeout_s, self._hosts, self._credentials, admin=self._admin
                    ),
                    True,
                )
            except (HeadLookupError, OSError) as err:
                entry = (self._clock(), f"cannot read the source's head: {err}", False)
        now = self._clock()
        # Forget what has expired (deleted repositories among it) as new answers come in.
        self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self._ttl_s}
        self._seen[key] = entry
        return entry

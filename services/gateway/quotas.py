"""Per-principal limits on each class of work: a token bucket (how many requests a key may
start, sustained and in a burst) and a cap on how many it may have in flight at once.

One key's flood spends only that key's allowance: buckets are per principal and per class,
so another key's searches are never refused because of it. A refusal happens before any
backend is called, and is the 429 `rate_limited` error with the seconds to wait (the REST
`Retry-After` header, the MCP tool error's detail). Over REST, a key that authenticated
lately is refused before its key lookup and before its body is read (gateway.early_refusal).

The limiter lives in the gateway process (GatewayApi calls it for REST and MCP alike), so
with several gateway replicas each enforces its own share; the figures are per replica.
Requests are refused, never queued: a queued flood would still hold connections. A refusal
is answered at once, except to a key that came back before the Retry-After it was given:
that one is answered after `hold_s` (a bounded number at a time), because a client that
retries at once would otherwise spend the machine's CPU on refusals, its own and the
gateway's, as fast as it can loop (bench/abuse.py).
Memory is bounded: a bucket that has refilled and has nothing in flight is the same as no
bucket, so it is dropped, and past `max_buckets` the least recently used idle ones go.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType

from cograph_api.rest_errors import ApiError
from svckit.requestctx import Principal


class Work(StrEnum):
    """The classes of work a key is limited in, each with its own allowance."""

    SEARCH = "search"  # hybrid search, routing, graph, references, commons search
    READ = "read"  # reading files, listing, jobs, notes by id, access changes
    GREP = "grep"  # regular expressions over every indexed line
    INDEX = "index"  # indexing and re-indexing repositories and collections, deleting them
    NOTES = "notes"  # posting, commenting, voting on and deleting notes
    HOOKS = "hooks"  # push webhook deliveries: no key, one allowance per vendor


@dataclass(frozen=True)
class Allowance:
    """One class's limit for one principal."""

    rate_per_s: float  # tokens added per second (the sustained request rate)
    burst: int  # the bucket's size: how many requests may start at once after a pause
    concurrent: int  # how many may be in flight at once

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.burst < 1 or self.concurrent < 1:
            raise ValueError("an allowance needs a positive rate, burst and concurrency")


@dataclass(frozen=True)
class QuotaSettings:
    allowances: Mapping[Work, Allowance]
    limit_admins: bool = True  # admin keys are limited too (their own buckets, same sizes)
    max_buckets: int = 100_000  # past this many, idle buckets are forgotten, oldest first
    # A refusal to a key that came back before the Retry-After it was given is answered
    # after this long (gateway.early_refusal), so a client that retries at once cannot turn
    # refusals into a flood of its own; 0 answers every refusal at once.
    hold_s: float = 1.0
    # At most this many refusals held at once per key, and in all; past either a refusal is
    # answered at once, so holding costs a bounded number of sockets and tasks.
    max_held_per_key: int = 32
    max_held: int = 1024


# Whose allowance a refusal speaks of, where it is not the key's.
_WHO = {Work.HOOKS: "to this webhook"}


class RateLimited(ApiError):
    """429: this principal has used its allowance for this class of work."""

    def __init__(self, work: Work, retry_after_s: int, why: str) -> None:
        super().__init__(
            429,
            "rate_limited",
            f"rate limited: {why} for {work.value} requests {_WHO.get(work, 'with this key')}; "
            f"retry after {retry_after_s} s",
        )
        self.work = work
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class _Bucket:
    __slots__ = ("in_flight", "tokens", "told_until", "updated_at")

    def __init__(self, tokens: float, now: float) -> None:
        self.tokens = tokens
        self.updated_at = now
        self.in_flight = 0
        self.told_until = 0.0  # the latest time a refusal told this key to come back


class Held:
    """A started request: leaving the `with` block (returning, raising, being cancelled)
    gives its concurrency slot back, exactly once."""

    __slots__ = ("_bucket",)

    def __init__(self, bucket: _Bucket | None) -> None:
        self._bucket = bucket

    def __enter__(self) -> Held:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bucket is not None:
            self._bucket.in_flight -= 1
            self._bucket = None


# Anonymous callers (GATEWAY_ALLOW_ANONYMOUS) have no key: they share one allowance.
_ANONYMOUS = "\x00anonymous"


def _name(principal: Principal | None) -> str:
    return principal.id if principal is not None else _ANONYMOUS


def _refilled(bucket: _Bucket, allowance: Allowance, now: float) -> float:
    elapsed = max(0.0, now - bucket.updated_at)
    return min(float(allowance.burst), bucket.tokens + elapsed * allowance.rate_per_s)


def _refusal(work: Work, allowance: Allowance, tokens: float, in_flight: int) -> RateLimited | None:
    if in_flight >= allowance.concurrent:
        # A slot frees when one of this key's own requests ends: soon, but unknown.
        return RateLimited(work, 1, f"{allowance.concurrent} requests already in flight")
    if tokens < 1.0:
        wait = (1.0 - tokens) / allowance.rate_per_s
        return RateLimited(
            work, max(1, math.ceil(wait)), f"more than {allowance.rate_per_s:g} a second"
        )
    return None


class Quotas:
    """The buckets of every principal and class, in this process."""

    def __init__(
        self, settings: QuotaSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._settings = settings
        self._clock = clock
        # (principal, class) -> bucket, least recently used first.
        self._buckets: OrderedDict[tuple[str, Work], _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def start(self, principal: Principal | None, work: Work) -> Held:
        """Takes a token and a concurrency slot for one request, or raises RateLimited.

        Synchronous on purpose: nothing can interleave between the check and the taking.
        """
        allowance = self._allowance(principal, work)
        if allowance is None:
            return Held(None)
        now = self._clock()
        key = (_name(principal), work)
        bucket = self._buckets.get(key)
        if bucket is None:
            self._evict(now)  # before adding: the new bucket is full and idle too
            bucket = _Bucket(float(allowance.burst), now)
            self._buckets[key] = bucket
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = _refilled(bucket, allowance, now)
            bucket.updated_at = now
        refused = _refusal(work, allowance, bucket.tokens, bucket.in_flight)
        if refused is not None:
            bucket.told_until = max(bucket.told_until, now + refused.retry_after_s)
            raise refused
        bucket.tokens -= 1.0
        bucket.in_flight += 1
        return Held(bucket)

    def refusal(self, principal: Principal | None, work: Work) -> RateLimited | None:
        """The RateLimited that `start` would raise now, or None; changes nothing.

        For refusing a request before its body is read (gateway.early_refusal): a request
        this admits still goes through `start`, which takes the token, so a request is
        never counted twice. No bucket means a full one, which admits.
        """
        allowance = self._allowance(principal, work)
        if allowance is None:
            return None
        bucket = self._buckets.get((_name(principal), work))
        if bucket is None:
            return None
        tokens = _refilled(bucket, allowance, self._clock())
        return _refusal(work, allowance, tokens, bucket.in_flight)

    def came_back_early(
        self, principal: Principal | None, work: Work, refused: RateLimited
    ) -> bool:
        """Notes a refusal made outside `start` (it tells the key to wait `retry_after_s`);
        returns whether the key had already been told to wait past now, i.e. it did not
        wait as told (a client that honours Retry-After never comes back early)."""
        bucket = self._buckets.get((_name(principal), work))
        if bucket is None:
            return False
        now = self._clock()
        early = now < bucket.told_until
        bucket.told_until = max(bucket.told_until, now + refused.retry_after_s)
        return early

    def _allowance(self, principal: Principal | None, work: Work) -> Allowance | None:
        allowance = self._settings.allowances.get(work)
        if principal is not None and principal.admin and not self._settings.limit_admins:
            return None
        return allowance

    def _full(self, key: tuple[str, Work], bucket: _Bucket, now: float) -> bool:
        """Whether the bucket has refilled and is idle: forgetting it changes nothing."""
        allowance = self._settings.allowances[key[1]]
        refilled = bucket.tokens + (now - bucket.updated_at) * allowance.rate_per_s
        return bucket.in_flight == 0 and refilled >= allowance.burst

    def _evict(self, now: float) -> None:
        # The oldest buckets first: drop those that have refilled (amortized O(1): each
        # bucket is dropped once), then, over the cap, the oldest idle ones even if not yet
        # refilled (such a key gets a full bucket again: lenient, never wrongly strict).
        # A bucket with a request in flight is kept, or its slot could not be given back.
        while self._buckets:
            key, bucket = next(iter(self._buckets.items()))
            if not self._full(key, bucket, now):
                break
            del self._buckets[key]
        excess = len(self._buckets) + 1 - self._settings.max_buckets
        if excess <= 0:
            return
        for key in [k for k, b in self._buckets.items() if b.in_flight == 0][:excess]:
            del self._buckets[key]

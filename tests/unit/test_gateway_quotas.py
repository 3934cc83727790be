"""gateway.quotas: per-principal token buckets and concurrency caps, on a clock the test
moves by hand (pure logic: no network, no sleeping)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.quotas import Allowance, Quotas, QuotaSettings, RateLimited, Work
from gateway.settings import DEFAULT_ALLOWANCES, quota_settings
from svckit.config import ConfigError, Env
from svckit.requestctx import Principal

ALICE = Principal("alice")
BOB = Principal("bob")
ROOT = Principal("root", admin=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _quotas(
    rate: float = 2.0,
    burst: int = 3,
    concurrent: int = 100,
    *,
    limit_admins: bool = True,
    max_buckets: int = 100_000,
) -> tuple[Quotas, Clock]:
    clock = Clock()
    settings = QuotaSettings(
        {work: Allowance(rate, burst, concurrent) for work in Work},
        limit_admins=limit_admins,
        max_buckets=max_buckets,
    )
    return Quotas(settings, clock), clock


def _take(quotas: Quotas, principal: Principal | None, work: Work = Work.SEARCH) -> None:
    with quotas.start(principal, work):
        pass


def test_exactly_the_burst_is_admitted_then_429_with_the_wait() -> None:
    quotas, _ = _quotas(rate=0.5, burst=3)
    for _ in range(3):
        _take(quotas, ALICE)
    with pytest.raises(RateLimited) as refused:
        _take(quotas, ALICE)
    # One token at 0.5 a second: 2 s away.
    assert refused.value.status == 429 and refused.value.error == "rate_limited"
    assert refused.value.retry_after_s == 2
    assert refused.value.headers() == {"Retry-After": "2"}
    assert "retry after 2 s" in refused.value.detail and "search" in refused.value.detail


def test_tokens_refill_at_the_rate_and_never_past_the_burst() -> None:
    quotas, clock = _quotas(rate=2.0, burst=3)
    for _ in range(3):
        _take(quotas, ALICE)
    clock.now += 0.49  # 0.98 of a token: not yet
    with pytest.raises(RateLimited) as refused:
        _take(quotas, ALICE)
    assert refused.value.retry_after_s == 1  # never 0: a client must wait at least a second
    clock.now += 0.01  # exactly one token now
    _take(quotas, ALICE)
    with pytest.raises(RateLimited):
        _take(quotas, ALICE)
    clock.now += 3600  # a long pause refills to the burst, not to 7200 tokens
    for _ in range(3):
        _take(quotas, ALICE)
    with pytest.raises(RateLimited):
        _take(quotas, ALICE)


def test_a_refused_request_spends_nothing() -> None:
    quotas, clock = _quotas(rate=1.0, burst=1)
    _take(quotas, ALICE)
    for _ in range(50):  # hammering while empty does not push the refill further away
        with pytest.raises(RateLimited):
            _take(quotas, ALICE)
    clock.now += 1.0
    _take(quotas, ALICE)


def test_one_keys_flood_leaves_other_keys_and_classes_their_allowance() -> None:
    quotas, _ = _quotas(rate=1.0, burst=2)
    for _ in range(2):
        _take(quotas, ALICE)
    with pytest.raises(RateLimited):
        _take(quotas, ALICE)
    _take(quotas, BOB)
    _take(quotas, BOB)
    _take(quotas, ALICE, Work.GREP)  # alice's grep allowance is its own


def test_admins_are_limited_unless_configured_not_to_be() -> None:
    limited, _ = _quotas(rate=1.0, burst=1)
    _take(limited, ROOT)
    with pytest.raises(RateLimited):
        _take(limited, ROOT)
    free, _ = _quotas(rate=1.0, burst=1, limit_admins=False)
    for _ in range(10):
        _take(free, ROOT)
    assert len(free) == 0  # an unlimited admin leaves no bucket behind


def test_anonymous_callers_share_one_allowance() -> None:
    quotas, _ = _quotas(rate=1.0, burst=2)
    _take(quotas, None)
    _take(quotas, None)
    with pytest.raises(RateLimited):
        _take(quotas, None)
    _take(quotas, Principal("anonymous"))  # a principal with that name is someone else


def test_concurrency_cap_exactly_and_released_on_return() -> None:
    quotas, _ = _quotas(rate=1000.0, burst=1000, concurrent=2)
    first = quotas.start(ALICE, Work.GREP)
    second = quotas.start(ALICE, Work.GREP)
    with pytest.raises(RateLimited) as refused:
        quotas.start(ALICE, Work.GREP)
    assert refused.value.retry_after_s == 1 and "2 requests already in flight" in str(refused.value)
    quotas.start(BOB, Work.GREP).__exit__(None, None, None)  # bob is not held up
    with first:
        pass
    with quotas.start(ALICE, Work.GREP):  # the freed slot
        pass
    with second:
        pass


def test_concurrency_released_when_the_request_raises() -> None:
    quotas, _ = _quotas(rate=1000.0, burst=1000, concurrent=1)
    with pytest.raises(ValueError), quotas.start(ALICE, Work.SEARCH):
        raise ValueError("backend failed")
    _take(quotas, ALICE)


def test_releasing_twice_frees_one_slot() -> None:
    quotas, _ = _quotas(rate=1000.0, burst=1000, concurrent=1)
    held = quotas.start(ALICE, Work.SEARCH)
    held.__exit__(None, None, None)
    held.__exit__(None, None, None)
    with quotas.start(ALICE, Work.SEARCH), pytest.raises(RateLimited):
        quotas.start(ALICE, Work.SEARCH)


async def test_concurrency_released_when_the_request_is_cancelled() -> None:
    quotas, _ = _quotas(rate=1000.0, burst=1000, concurrent=1)
    started = asyncio.Event()

    async def request() -> None:
        with quotas.start(ALICE, Work.SEARCH):
            started.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(request())
    await started.wait()
    with pytest.raises(RateLimited):
        quotas.start(ALICE, Work.SEARCH)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    _take(quotas, ALICE)


def test_refilled_idle_buckets_are_forgotten() -> None:
    quotas, clock = _quotas(rate=1.0, burst=5)
    for number in range(1000):
        _take(quotas, Principal(f"key-{number}"))
    assert len(quotas) == 1000
    clock.now += 0.5  # half a token back each: not yet full, all kept
    _take(quotas, Principal("late"))
    assert len(quotas) == 1001
    clock.now += 10.0  # every old bucket is full again: the next start drops them
    _take(quotas, Principal("later"))
    assert len(quotas) == 1


def test_many_keys_stay_under_the_cap_and_busy_buckets_are_kept() -> None:
    quotas, _ = _quotas(rate=0.001, burst=5, max_buckets=100)
    busy = quotas.start(Principal("busy"), Work.SEARCH)
    for number in range(10_000):
        _take(quotas, Principal(f"key-{number}"))
        assert len(quotas) <= 100
    # The busy bucket survived: its slot is still counted, and then given back.
    with busy:
        pass
    quotas_busy_again = quotas.start(Principal("busy"), Work.SEARCH)
    quotas_busy_again.__exit__(None, None, None)


def test_forgetting_an_unrefilled_bucket_only_ever_admits_more() -> None:
    quotas, _ = _quotas(rate=0.001, burst=1, max_buckets=100)
    _take(quotas, ALICE)
    with pytest.raises(RateLimited):
        _take(quotas, ALICE)
    for number in range(200):
        _take(quotas, Principal(f"key-{number}"))
    _take(quotas, ALICE)  # forgotten: a fresh bucket (lenient), never a wrong refusal


def test_an_allowance_must_be_positive() -> None:
    for bad in ((0.0, 1, 1), (1.0, 0, 1), (1.0, 1, 0)):
        with pytest.raises(ValueError):
            Allowance(*bad)


def test_settings_defaults_and_overrides() -> None:
    settings = quota_settings(Env({}))
    assert settings is not None and settings.limit_admins
    assert dict(settings.allowances) == DEFAULT_ALLOWANCES
    assert set(settings.allowances) == set(Work)
    tuned = quota_settings(
        Env(
            {
                "GATEWAY_QUOTA_GREP_RATE": "0.5",
                "GATEWAY_QUOTA_GREP_BURST": "4",
                "GATEWAY_QUOTA_GREP_CONCURRENT": "1",
                "GATEWAY_QUOTA_ADMINS": "false",
            }
        )
    )
    assert tuned is not None and not tuned.limit_admins
    assert tuned.allowances[Work.GREP] == Allowance(0.5, 4, 1)
    assert tuned.allowances[Work.SEARCH] == DEFAULT_ALLOWANCES[Work.SEARCH]
    assert quota_settings(Env({"GATEWAY_QUOTAS": "false"})) is None
    with pytest.raises(ConfigError, match="GATEWAY_QUOTA_SEARCH_RATE"):
        quota_settings(Env({"GATEWAY_QUOTA_SEARCH_RATE": "0"}))


def test_refusal_says_what_start_would_and_takes_nothing() -> None:
    quotas, clock = _quotas(rate=0.5, burst=2, concurrent=1)
    assert quotas.refusal(ALICE, Work.SEARCH) is None  # no bucket yet: a full one
    assert len(quotas) == 0  # and asking made none
    held = quotas.start(ALICE, Work.SEARCH)
    in_flight = quotas.refusal(ALICE, Work.SEARCH)
    assert in_flight is not None and in_flight.retry_after_s == 1
    assert "1 requests already in flight" in in_flight.detail
    held.__exit__(None, None, None)
    assert quotas.refusal(ALICE, Work.SEARCH) is None  # one token left
    assert quotas.refusal(ALICE, Work.SEARCH) is None  # asking twice took nothing
    _take(quotas, ALICE)
    spent = quotas.refusal(ALICE, Work.SEARCH)
    with pytest.raises(RateLimited) as refused:
        _take(quotas, ALICE)
    assert spent is not None and spent.retry_after_s == refused.value.retry_after_s == 2
    assert spent.detail == refused.value.detail
    clock.now += 1.999
    assert quotas.refusal(ALICE, Work.SEARCH) is not None
    clock.now += 0.001  # a whole token back
    assert quotas.refusal(ALICE, Work.SEARCH) is None
    assert quotas.refusal(BOB, Work.SEARCH) is None  # another key's bucket is its own


def test_refusal_leaves_unlimited_admins_alone() -> None:
    quotas, _ = _quotas(burst=1, limit_admins=False)
    _take(quotas, ROOT)
    _take(quotas, ROOT)
    assert quotas.refusal(ROOT, Work.SEARCH) is None


def test_a_key_that_comes_back_before_its_retry_after_is_told_so() -> None:
    quotas, clock = _quotas(rate=0.5, burst=1)
    assert not quotas.came_back_early(ALICE, Work.SEARCH, RateLimited(Work.SEARCH, 2, "x"))
    _take(quotas, ALICE)
    with pytest.raises(RateLimited):
        _take(quotas, ALICE)  # told: come back in 2 s
    clock.now += 1.999
    refused = quotas.refusal(ALICE, Work.SEARCH)
    assert refused is not None
    assert quotas.came_back_early(ALICE, Work.SEARCH, refused)
    assert refused.retry_after_s == 1  # told again: come back at 1.999 + 1 s
    clock.now += 0.5  # past the 2 s first told, not the second refusal's 1 s more
    assert quotas.came_back_early(ALICE, Work.SEARCH, refused)
    clock.now += 1.0  # exactly when the last refusal (at 2.499, 1 s) said: not early
    assert not quotas.came_back_early(ALICE, Work.SEARCH, refused)
    assert not quotas.came_back_early(BOB, Work.SEARCH, refused)  # no bucket: never told


def test_hold_settings_defaults_and_edges() -> None:
    settings = quota_settings(Env({}))
    assert settings is not None
    assert (settings.hold_s, settings.max_held_per_key, settings.max_held) == (1.0, 32, 1024)
    edges = quota_settings(
        Env(
            {
                "GATEWAY_QUOTA_HOLD_S": "0",  # every refusal at once
                "GATEWAY_QUOTA_MAX_HELD_PER_KEY": "1",
                "GATEWAY_QUOTA_MAX_HELD": "1000000",
            }
        )
    )
    assert edges is not None
    assert (edges.hold_s, edges.max_held_per_key, edges.max_held) == (0.0, 1, 1_000_000)
    longest = quota_settings(Env({"GATEWAY_QUOTA_HOLD_S": "60"}))
    assert longest is not None and longest.hold_s == 60.0
    for name, value in (
        ("GATEWAY_QUOTA_HOLD_S", "-0.1"),
        ("GATEWAY_QUOTA_HOLD_S", "60.1"),
        ("GATEWAY_QUOTA_MAX_HELD_PER_KEY", "0"),
        ("GATEWAY_QUOTA_MAX_HELD", "0"),
    ):
        with pytest.raises(ConfigError, match=name):
            quota_settings(Env({name: value}))

"""gateway.early_refusal and gateway.auth.RecentKeys: a key over its allowance is refused
with 429 before its key is looked up in the database and before its body is read.

The middleware runs as ASGI with a receive that fails the test if the body is read and an
inner app that fails it if the request gets past; the key lookup is a stand-in that counts
calls (the database lookup itself is tested in tests/integration/test_gateway_quotas.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from typing import Any, cast

import pytest
from fastapi.routing import APIRoute
from starlette.types import Message

from cograph_api.admin_keys import MAX_KEY_CHARS
from gateway.api import GatewayApi, work_of
from gateway.auth import Authenticator, AuthMiddleware, KeyLabel, PublicPaths, RecentKeys
from gateway.backends import Backends
from gateway.early_refusal import ROUTES, EarlyRefusal
from gateway.errors import ApiError
from gateway.keys_store import KeysStore
from gateway.quotas import Allowance, Quotas, QuotaSettings, Work
from gateway.routes_commons import commons_router
from gateway.routes_retrieval import retrieval_router
from svckit.requestctx import Principal

ALICE = Principal("alice")
SECRET = "cg_" + "a" * 43


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------- RecentKeys


def test_recent_keys_remember_a_principal_for_the_ttl_and_no_longer() -> None:
    clock = Clock()
    recent = RecentKeys(ttl_s=60.0, max_keys=10, clock=clock)
    assert recent.principal(SECRET) is None
    recent.remember(SECRET, ALICE)
    clock.now += 60.0
    assert recent.principal(SECRET) == ALICE  # at the TTL: still known
    clock.now += 0.001
    assert recent.principal(SECRET) is None  # past it: forgotten, the database decides
    assert len(recent) == 0


def test_recent_keys_keep_only_the_hash_and_at_most_max_keys() -> None:
    recent = RecentKeys(ttl_s=60.0, max_keys=2, clock=Clock())
    secrets = [f"cg_{n:043d}" for n in range(3)]
    for number, secret in enumerate(secrets):
        recent.remember(secret, Principal(f"p{number}"))
    assert len(recent) == 2
    assert recent.principal(secrets[0]) is None  # the least recently authenticated went
    assert recent.principal(secrets[2]) == Principal("p2")
    assert all(secret.encode() not in key for key in recent._keys for secret in secrets)
    too_long = "cg_" + "b" * MAX_KEY_CHARS
    recent.remember(too_long, ALICE)
    assert recent.principal(too_long) is None  # longer than any key: not even hashed


# ---------------------------------------------------------------- the route table


def _app_routes() -> dict[tuple[str, str], Any]:
    api = GatewayApi(cast(Backends, None))
    routes: dict[tuple[str, str], Any] = {}
    for router in (retrieval_router(api), commons_router(api)):
        for route in router.routes:
            assert isinstance(route, APIRoute)
            for method in route.methods or ():
                routes[(method, route.path)] = route.endpoint
    return routes


@pytest.mark.parametrize("method,path,call", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_each_early_route_is_a_real_route_calling_its_limited_method(
    method: str, path: str, call: Any
) -> None:
    template = re.sub(r"\[\^/\]\+", "{post_id}", path)
    endpoint = _app_routes().get((method, template))
    assert endpoint is not None, f"no route {method} {template}"
    # The route's handler calls this GatewayApi method (so its @limited class applies).
    assert call.__name__ in endpoint.__code__.co_names, (template, endpoint.__code__.co_names)
    assert work_of(call) is not None


def test_the_table_maps_paths_to_their_class_and_nothing_else() -> None:
    early = _early(_quotas()[0])
    assert early.route("POST", "/api/search") is not None
    assert early.route("POST", "/api/search")[0] is Work.SEARCH  # type: ignore[index]
    assert early.route("POST", "/api/grep")[0] is Work.GREP  # type: ignore[index]
    found = early.route("POST", "/v1/posts/0193/votes")
    assert found is not None and found[0] is Work.NOTES
    assert found[1].path == "/v1/posts/{post_id}/votes"
    assert early.route("GET", "/api/search") is None  # another method
    assert early.route("POST", "/v1/posts/a/b/votes") is None  # one segment only
    assert early.route("POST", "/api/search/") is None


def test_a_method_that_is_not_limited_is_refused_in_the_table() -> None:
    with pytest.raises(ValueError, match="not @limited"):
        EarlyRefusal(_quotas()[0], SETTINGS, (("POST", "/x", GatewayApi.set_post_hidden),))


# ---------------------------------------------------------------- the middleware


SETTINGS = QuotaSettings({work: Allowance(0.5, 2, 100) for work in Work})


def _quotas(burst: int = 2) -> tuple[Quotas, Clock]:
    clock = Clock()
    settings = QuotaSettings({work: Allowance(0.5, burst, 100) for work in Work})
    return Quotas(settings, clock), clock


def _early(quotas: Quotas, **settings: Any) -> EarlyRefusal:
    return EarlyRefusal(quotas, dataclasses.replace(SETTINGS, **settings))


class CountingAuthenticator(Authenticator):
    """The database lookup replaced by a count (and a 401)."""

    def __init__(self, recent: RecentKeys, allow_anonymous: bool = False) -> None:
        super().__init__(cast(KeysStore, None), allow_anonymous, recent=recent)
        self.lookups = 0

    async def identify(self, authorization: str | None) -> tuple[Principal | None, KeyLabel | None]:
        self.lookups += 1
        raise ApiError(401, "unauthenticated", "looked up")


class Exchange:
    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.app_called = False

    async def receive(self) -> dict[str, Any]:
        raise AssertionError("the body was read")

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        self.app_called = True

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> Any:
        return json.loads(self.sent[1]["body"])


def _scope(method: str, path: str, authorization: str | None) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"4000")]
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    return {"type": "http", "method": method, "path": path, "headers": headers}


async def _call(
    quotas: Quotas,
    authenticator: Authenticator,
    scope: dict[str, Any],
    early: EarlyRefusal | None = None,
) -> Exchange:
    exchange = Exchange()
    middleware = AuthMiddleware(
        exchange.app, authenticator, PublicPaths([]), early=early or _early(quotas)
    )
    await middleware(scope, exchange.receive, exchange.send)
    return exchange


async def test_a_known_key_over_its_allowance_gets_429_unread_and_unlooked_up() -> None:
    quotas, _ = _quotas(burst=2)
    recent = RecentKeys()
    recent.remember(SECRET, ALICE)
    authenticator = CountingAuthenticator(recent)
    for _ in range(2):
        with quotas.start(ALICE, Work.SEARCH):
            pass
    scope = _scope("POST", "/api/search", f"Bearer {SECRET}")
    exchange = await _call(quotas, authenticator, scope)
    assert exchange.status == 429 and not exchange.app_called
    assert authenticator.lookups == 0  # no database round trip for a refusal
    assert exchange.headers[b"retry-after"] == b"2"  # one token at 0.5 a second
    assert exchange.body["error"] == "rate_limited"
    assert "for search requests" in exchange.body["detail"]
    assert scope["route"].path == "/api/search"  # the metrics label it by its route
    assert b"x-request-id" in exchange.headers
    # Its other classes of work are not spent: a grep goes on to the key lookup.
    grep = await _call(quotas, authenticator, _scope("POST", "/api/grep", f"Bearer {SECRET}"))
    assert grep.status == 401 and authenticator.lookups == 1


async def test_a_key_within_its_allowance_goes_on_and_takes_nothing_here() -> None:
    quotas, _ = _quotas(burst=2)
    recent = RecentKeys()
    recent.remember(SECRET, ALICE)
    authenticator = CountingAuthenticator(recent)
    with quotas.start(ALICE, Work.SEARCH):
        pass  # one token of two left
    for _ in range(3):
        exchange = await _call(
            quotas, authenticator, _scope("POST", "/api/search", f"Bearer {SECRET}")
        )
        assert exchange.status == 401  # went on to the lookup: the early check admitted it
    assert authenticator.lookups == 3
    assert quotas.refusal(ALICE, Work.SEARCH) is None  # still one token: nothing taken


async def test_an_unknown_key_or_another_route_always_goes_to_the_lookup() -> None:
    quotas, _ = _quotas(burst=1)
    with quotas.start(ALICE, Work.SEARCH):
        pass
    authenticator = CountingAuthenticator(RecentKeys())  # ALICE's key not seen lately
    exchange = await _call(quotas, authenticator, _scope("POST", "/api/search", f"Bearer {SECRET}"))
    assert exchange.status == 401 and authenticator.lookups == 1
    recent = RecentKeys()
    recent.remember(SECRET, ALICE)
    authenticator = CountingAuthenticator(recent)
    for path in ("/api/keys", "/api/access/grant"):  # not in the table: limited later
        exchange = await _call(quotas, authenticator, _scope("POST", path, f"Bearer {SECRET}"))
        assert exchange.status == 401
    assert authenticator.lookups == 2
    malformed = await _call(quotas, authenticator, _scope("POST", "/api/search", f"Basic {SECRET}"))
    assert malformed.status == 401 and authenticator.lookups == 3


async def test_anonymous_requests_share_one_early_checked_allowance() -> None:
    quotas, _ = _quotas(burst=1)
    with quotas.start(None, Work.SEARCH):
        pass
    refused = await _call(
        quotas,
        CountingAuthenticator(RecentKeys(), allow_anonymous=True),
        _scope("POST", "/api/search", None),
    )
    assert refused.status == 429
    # Without anonymous access, a request without a key is a 401 from the lookup.
    closed = CountingAuthenticator(RecentKeys(), allow_anonymous=False)
    assert (await _call(quotas, closed, _scope("POST", "/api/search", None))).status == 401
    assert closed.lookups == 1


# ---------------------------------------------------------------- holding refusals


def _spent(burst: int = 1) -> tuple[Quotas, Clock, CountingAuthenticator]:
    quotas, clock = _quotas(burst=burst)
    for _ in range(burst):
        with quotas.start(ALICE, Work.SEARCH):
            pass
    recent = RecentKeys(clock=clock)
    recent.remember(SECRET, ALICE)
    return quotas, clock, CountingAuthenticator(recent)


def _search_scope() -> dict[str, Any]:
    return _scope("POST", "/api/search", f"Bearer {SECRET}")


async def test_a_key_that_waits_as_told_is_never_held() -> None:
    clock = Clock()
    quotas = Quotas(QuotaSettings({work: Allowance(0.5, 10, 1) for work in Work}), clock)
    recent = RecentKeys(clock=clock)
    recent.remember(SECRET, ALICE)
    authenticator = CountingAuthenticator(recent)
    early = _early(quotas, hold_s=30.0)
    with quotas.start(ALICE, Work.SEARCH):  # one search in flight, the most it may have
        first = await _call(quotas, authenticator, _search_scope(), early)
        assert first.status == 429 and first.headers[b"retry-after"] == b"1"
        clock.now += 1.0  # came back when told to; the search is still running
        second = await asyncio.wait_for(_call(quotas, authenticator, _search_scope(), early), 5)
        assert second.status == 429 and early.held == 0
        clock.now += 0.5  # this time it did not wait the second it was told
        third = asyncio.create_task(_call(quotas, authenticator, _search_scope(), early))
        await asyncio.sleep(0.05)
        assert early.held == 1
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)


async def test_a_key_that_comes_back_early_is_answered_after_the_hold() -> None:
    quotas, clock, authenticator = _spent()
    early = _early(quotas, hold_s=30.0)
    await _call(quotas, authenticator, _search_scope(), early)  # told: come back in 2 s
    clock.now += 1.0
    held = asyncio.create_task(_call(quotas, authenticator, _search_scope(), early))
    await asyncio.sleep(0.05)
    assert not held.done() and early.held == 1  # nothing sent yet
    held.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await held
    assert early.held == 0  # a cancelled hold gives its place back
    short = _early(quotas, hold_s=0.01)
    answered = await asyncio.wait_for(_call(quotas, authenticator, _search_scope(), short), 5)
    assert answered.status == 429 and answered.body["error"] == "rate_limited"
    assert answered.headers[b"retry-after"] == b"1"  # one token at 0.5 a second, 1 s left
    assert authenticator.lookups == 0


@pytest.mark.parametrize("cap", ["max_held_per_key", "max_held"])
async def test_past_the_cap_refusals_are_answered_at_once(cap: str) -> None:
    quotas, _, authenticator = _spent()
    early = _early(quotas, hold_s=30.0, **{cap: 2})
    await _call(quotas, authenticator, _search_scope(), early)
    held = [
        asyncio.create_task(_call(quotas, authenticator, _search_scope(), early)) for _ in range(2)
    ]
    await asyncio.sleep(0.05)
    assert early.held == 2
    third = await asyncio.wait_for(_call(quotas, authenticator, _search_scope(), early), 5)
    assert third.status == 429  # answered at once: the cap is reached
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)
    assert early.held == 0


async def test_hold_zero_answers_every_refusal_at_once() -> None:
    quotas, _, authenticator = _spent()
    early = _early(quotas, hold_s=0.0)
    for _ in range(3):
        exchange = await asyncio.wait_for(_call(quotas, authenticator, _search_scope(), early), 5)
        assert exchange.status == 429

"""`POST /api/hooks/github` and `POST /api/hooks/gitlab`: push webhooks that re-index the
repositories a push names at once, instead of at the next sync check.

The routes take no API key (the auth middleware passes `/api/hooks/` through): the
vendor's signature or token, checked with the secret configured for that vendor
(`GATEWAY_GITHUB_WEBHOOK_SECRET`, `GATEWAY_GITLAB_WEBHOOK_SECRET`, or their `_FILE`
forms), is the authentication. In order:

1. No secret configured: 404, as for a route that does not exist.
2. The vendor's allowance (Work.HOOKS, one per vendor, since a delivery has no key to
   count it by): past it 429 with Retry-After, before the body is read.
3. The body, under GATEWAY_MAX_BODY_BYTES (413, gateway.body_limit).
4. The signature (GitHub) or token (GitLab): 401 when missing or wrong. Nothing about
   which repositories exist is said before it passes.
5. The event: GitHub's `ping` and any event that is not a push answer 200 and do nothing;
   a push whose payload lacks what the hook needs is 400.
6. Retrieval's SyncSource, as the webhook identity (GatewayApi.sync_source): 202 with the
   slugs queued, or 200 when none are (`queued`, `up_to_date`; `ignored` says why a
   delivery was not a branch push).

Each delivery is logged with its delivery id (beside the request id every log line
carries), never the secret, the signature or the token.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from cograph_api import limits
from gateway.api import GatewayApi
from gateway.errors import ApiError, invalid
from gateway.hooks import GITHUB, GITLAB, VENDORS, Malformed, Vendor, read_payload, read_push
from gateway.quotas import Quotas, Work
from gateway.settings import GatewaySettings
from svckit import requestctx
from svckit.requestctx import Principal

log = logging.getLogger(__name__)

PREFIX = "/api/hooks"
# A delivery id is logged as given when it looks like one (GUIDs, UUIDs), else not at all.
_DELIVERY = re.compile(r"^[A-Za-z0-9._:\-]{1,100}$")
# Each vendor's deliveries share one allowance under this name (no key can be named so).
_BUCKETS = {vendor.name: Principal(f"\x00webhook:{vendor.name}") for vendor in VENDORS}


def _delivery(value: str | None) -> str | None:
    return value if value is not None and _DELIVERY.match(value) else None


def _answer(status: int, queued: list[str], up_to_date: list[str], **extra: Any) -> JSONResponse:
    return JSONResponse({"queued": queued, "up_to_date": up_to_date, **extra}, status_code=status)


def hooks_router(api: GatewayApi, settings: GatewaySettings, quotas: Quotas | None) -> APIRouter:
    # Not in the OpenAPI schema: these routes speak the vendors' formats, documented by
    # them (and in the README), and take no bearer key.
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    secrets = {
        "github": settings.github_webhook_secret,
        "gitlab": settings.gitlab_webhook_secret,
    }

    async def deliver(vendor: Vendor, request: Request) -> JSONResponse:
        secret = secrets[vendor.name]
        if secret is None:
            raise HTTPException(404)  # disabled: the same answer as no route at all
        delivery = _delivery(request.headers.get(vendor.delivery_header))
        held = (
            quotas.start(_BUCKETS[vendor.name], Work.HOOKS)
            if quotas is not None
            else contextlib.nullcontext()
        )
        with held:
            body = await request.body()
            problem = vendor.check(secret, request.headers, body)
            if problem is not None:
                log.warning(
                    "push webhook refused",
                    extra={
                        "hook": vendor.name,
                        "delivery": delivery,
                        "request_id": requestctx.current_request_id(),
                        "reason": problem,
                    },
                )
                raise ApiError(401, "unauthenticated", problem)
            return await _authentic(vendor, request, body, delivery)

    async def _authentic(
        vendor: Vendor, request: Request, body: bytes, delivery: str | None
    ) -> JSONResponse:
        event = request.headers.get(vendor.event_header)
        facts: dict[str, Any] = {
            "hook": vendor.name,
            "delivery": delivery,
            "request_id": requestctx.current_request_id(),
            "event": event,
        }
        if event is None:
            raise invalid(f"missing {vendor.event_header} header")
        if event in vendor.ping_events:
            log.info("push webhook: ping", extra=facts)
            return _answer(200, [], [], ignored=f"{event[:50]}: nothing to do")
        if event not in vendor.push_events:
            log.info("push webhook: not a push event", extra=facts)
            return _answer(200, [], [], ignored=f"{event[:50]}: not a push event")
        try:
            push = read_push(
                vendor, read_payload(vendor, body, request.headers.get("content-type", ""))
            )
        except Malformed as err:
            log.info("push webhook: malformed push", extra={**facts, "error": err.message})
            raise invalid(err.message) from None
        facts.update(repository=push.name, ref=push.ref[:300], commit=push.commit)
        branch = push.branch
        why = None
        if branch is None:
            why = "the ref is not a branch"
        elif push.deleted:
            why = "the branch was deleted"
        elif len(branch) > limits.BRANCH_MAX_CHARS:
            why = "no repository is indexed on a branch with so long a name"
        if branch is None or why is not None:
            log.info("push webhook: nothing to index", extra={**facts, "ignored": why})
            return _answer(200, [], [], ignored=why)
        answer = await api.sync_source(push.keys, branch, push.commit)
        queued, current = list(answer["queued"]), list(answer["up_to_date"])
        log.info("push webhook", extra={**facts, "queued": queued, "up_to_date": current})
        return _answer(202 if queued else 200, queued, current)

    @router.post("/github")
    async def github(request: Request) -> JSONResponse:
        return await deliver(GITHUB, request)

    @router.post("/gitlab")
    async def gitlab(request: Request) -> JSONResponse:
        return await deliver(GITLAB, request)

    return router

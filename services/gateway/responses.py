"""Response documentation shared by the routes: the answer each route gives, with an
example, and the error statuses it can answer with, each with the error body."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from gateway.response_examples import ERRORS, EXAMPLES

# Every route can answer these: a malformed request or a backend's INVALID_ARGUMENT (400),
# no or a bad key (401), a body over GATEWAY_MAX_BODY_BYTES (413, gateway.body_limit), the
# key's allowance spent (429, gateway.quotas) and a backend down (503).
ALWAYS = (400, 401, 413, 429, 503)

_WHY: dict[int, str] = {
    400: "The request is invalid; detail names the field and what was wrong.",
    401: "No API key, or one that is invalid or revoked.",
    403: "The key may not do this (an admin key, or a write grant, is needed).",
    404: "No such thing, or one this key may not read.",
    409: "It conflicts with the current state (being indexed, already exists).",
    413: "The request body is over GATEWAY_MAX_BODY_BYTES.",
    429: "The key's allowance for this kind of request is spent; see Retry-After.",
    501: "The backend this needs is not deployed.",
    503: "A backend service is unavailable.",
    504: "The request ran past its time bound.",
    507: "The data disk is full.",
}


class ErrorBody(BaseModel):
    """Every error: a stable machine code and a human explanation."""

    error: str = Field(description="A stable machine code, e.g. invalid_argument, not_found.")
    detail: str = Field(description="What was wrong, in words.")


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for these error statuses and those every route has."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*ALWAYS, *statuses}):
        entry: dict[str, Any] = {
            "model": ErrorBody,
            "description": _WHY[status],
            "content": {"application/json": {"example": ERRORS[status]}},
        }
        if status == 429:
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before trying again.",
                    "schema": {"type": "integer"},
                }
            }
        out[status] = entry
    return out


def answers(
    model: Any,
    example: str | tuple[str, ...],
    *statuses: int,
    status: int = 200,
    description: str = "The answer.",
) -> dict[int | str, dict[str, Any]]:
    """`responses` for a route answering `model` with `status` (documented with the named
    EXAMPLES), or one of the error statuses. Routes declare response_model=None: the model
    documents the answer without re-serialising it (see gateway.response_models)."""
    names = (example,) if isinstance(example, str) else example
    media: dict[str, Any] = (
        {"example": EXAMPLES[names[0]]}
        if len(names) == 1
        else {"examples": {name: {"value": EXAMPLES[name]} for name in names}}
    )
    return {
        status: {
            "model": model,
            "description": description,
            "content": {"application/json": media},
        },
        **errors(*statuses),
    }

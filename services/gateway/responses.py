"""Response documentation shared by the routes: the error body and the statuses it comes with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorBody(BaseModel):
    """Every error: a stable machine code and a human explanation."""

    error: str
    detail: str


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses (401, and 429 from the
    per-key limits of gateway.quotas, are always possible)."""
    wanted = sorted({400, 401, 429, 503, *statuses})
    return {status: {"model": ErrorBody} for status in wanted}

"""The error every REST response and REST client share: `{"error": "<code>", "detail": "..."}`.

The gateway raises it (and maps backend gRPC statuses to it); the REST client rebuilds it
from a response, so a CLI command sees the same status, code and detail the gateway sent.
"""

from __future__ import annotations


class ApiError(Exception):
    """An error with its HTTP status, machine code and human detail."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail

    def body(self) -> dict[str, str]:
        return {"error": self.error, "detail": self.detail}


def invalid(detail: str) -> ApiError:
    return ApiError(400, "invalid_argument", detail)


def not_deployed(backend: str) -> ApiError:
    return ApiError(503, "unavailable", f"the {backend} service is not configured")

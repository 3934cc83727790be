"""One error shape for every response: `{"error": "<code>", "detail": "..."}`.

Backend gRPC statuses map to HTTP statuses here and nowhere else; a machine reason the
backend sent (e.g. semantic_search_unavailable, as a google.rpc.ErrorInfo; see
svckit.errors.reason_of) becomes the error code.
Nothing a caller sees ever contains a stack trace.
"""

from __future__ import annotations

import logging

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from cograph_api.rest_errors import ApiError, invalid, not_deployed
from gateway.quotas import RateLimited
from svckit.errors import DISK_FULL, database_outage, reason_of

# ApiError, invalid and not_deployed are defined once in cograph_api.rest_errors (the REST
# client raises the same error) and reason_of in svckit.errors (the CLI reads reasons too);
# they are offered here beside the gRPC mapping.
__all__ = [
    "ApiError",
    "from_grpc",
    "install_error_handlers",
    "invalid",
    "not_deployed",
    "reason_of",
]

log = logging.getLogger(__name__)

# gRPC status -> (HTTP status, default error code).
_GRPC_TO_HTTP: dict[grpc.StatusCode, tuple[int, str]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_argument"),
    grpc.StatusCode.OUT_OF_RANGE: (400, "invalid_argument"),
    grpc.StatusCode.UNAUTHENTICATED: (401, "unauthenticated"),
    grpc.StatusCode.PERMISSION_DENIED: (403, "permission_denied"),
    grpc.StatusCode.NOT_FOUND: (404, "not_found"),
    grpc.StatusCode.ALREADY_EXISTS: (409, "already_exists"),
    grpc.StatusCode.ABORTED: (409, "conflict"),
    grpc.StatusCode.FAILED_PRECONDITION: (409, "failed_precondition"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "resource_exhausted"),
    grpc.StatusCode.UNIMPLEMENTED: (501, "not_implemented"),
    grpc.StatusCode.UNAVAILABLE: (503, "unavailable"),
    grpc.StatusCode.CANCELLED: (503, "unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "deadline_exceeded"),
}

_HTTP_CODES: dict[int, str] = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "resource_exhausted",
    501: "not_implemented",
    503: "unavailable",
}


def from_grpc(err: grpc.aio.AioRpcError) -> ApiError:
    """Maps a failed backend call to the error the HTTP caller sees."""
    code = err.code()
    status, error = _GRPC_TO_HTTP.get(code, (502, "backend_error"))
    reason = reason_of(err)
    if reason:
        error = reason
    if reason == DISK_FULL:
        status = 507  # Insufficient Storage: the request was fine, the disk is not
    detail = err.details() or code.name.lower()
    if status == 502:
        # INTERNAL / UNKNOWN / DATA_LOSS: the backend already hid its internals; say little.
        log.warning("backend error", extra={"code": code.name, "detail": detail})
        detail = "a backend service failed; see its logs"
    elif code == grpc.StatusCode.UNAVAILABLE and not reason:
        detail = "a backend service is unavailable"
    return ApiError(status, error, detail)


def _validation_detail(exc: RequestValidationError) -> str:
    parts: list[str] = []
    for item in exc.errors()[:5]:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body",)]
        where = ".".join(loc) or "body"
        if item.get("type") == "json_invalid":
            where = "body"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Every failure path returns the JSON error shape, never FastAPI's 422 or a trace."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        headers = exc.headers() if isinstance(exc, RateLimited) else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(invalid(_validation_detail(exc)).body(), status_code=400)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        status = exc.status_code
        error = _HTTP_CODES.get(status, "error")
        detail = exc.detail if isinstance(exc.detail, str) else error
        return JSONResponse(
            {"error": error, "detail": detail},
            status_code=status,
            headers=getattr(exc, "headers", None),
        )

    async def grpc_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, grpc.aio.AioRpcError)
        mapped = from_grpc(exc)
        return JSONResponse(mapped.body(), status_code=mapped.status)

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        # The gateway's own database (the keys) timing out or gone: 503, not 500.
        outage = database_outage(exc)
        if outage is not None:
            log.warning("database unavailable", extra={"error": str(exc)})
            return JSONResponse(
                {"error": outage.reason or "unavailable", "detail": outage.message},
                status_code=503,
            )
        log.error("unhandled error", exc_info=exc)
        return JSONResponse({"error": "internal", "detail": "internal error"}, status_code=500)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(grpc.aio.AioRpcError, grpc_error)
    app.add_exception_handler(Exception, unexpected)

"""Server side of every call: authentication of the caller, request context, access logging
and domain-error mapping (the reason as a google.rpc.ErrorInfo), for grpc.aio."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from svckit import requestctx
from svckit.errors import (
    DATABASE_UNAVAILABLE,
    DISK_FULL,
    DomainError,
    database_outage,
    disk_error,
    error_trailers,
)
from svckit.internal_auth import AUTH_HEADER, Claims, InvalidToken, TokenVerifier

log = logging.getLogger("svckit.access")

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]

# Kubernetes gRPC probes and grpcurl send no metadata; health and the schema (reflection)
# reveal nothing a caller could misuse, so they need no token. Everything else does.
UNAUTHENTICATED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_CLAIM_HEADERS = frozenset(
    {
        requestctx.REQUEST_ID_HEADER,
        requestctx.PRINCIPAL_HEADER,
        requestctx.ADMIN_HEADER,
        AUTH_HEADER,
    }
)


def _claim_values(metadata: Sequence[tuple[str, Any]]) -> dict[str, str]:
    """The request id, principal, admin and token headers; each at most once, since a proxy
    that kept the last of two copies would act on a value the token never covered."""
    values: dict[str, str] = {}
    for key, value in metadata:
        if key in _CLAIM_HEADERS:
            if key in values:
                raise InvalidToken(f"{key} sent more than once")
            values[key] = value if isinstance(value, str) else bytes(value).decode()
    return values


def verified_claims(
    verifier: TokenVerifier, metadata: Sequence[tuple[str, Any]], method: str
) -> Claims:
    """The claims a call's metadata makes, once its token has been checked against them and
    against `method`, the method this server is asked to run (a token made for another
    method, of this service or another, is refused)."""
    values = _claim_values(metadata)
    principal = values.get(requestctx.PRINCIPAL_HEADER, "")
    claims = Claims(
        principal=principal,
        # The same reading as the signer's: without a principal the flag means nothing.
        admin=values.get(requestctx.ADMIN_HEADER) == "1" and bool(principal),
        request_id=values.get(requestctx.REQUEST_ID_HEADER, ""),
    )
    verifier.verify(values.get(AUTH_HEADER), claims, method)
    return claims


def _refusal(method: str, reason: str, request_id: str) -> Callable[..., Awaitable[None]]:
    message = f"unauthenticated internal call: {reason}"

    # It never reads the request (or the request stream).
    async def refuse(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        log.warning(
            "unauthenticated rpc",
            extra={
                "request_id": request_id,
                "method": method,
                "code": grpc.StatusCode.UNAUTHENTICATED.name,
                "reason": reason,
                "peer": context.peer(),
            },
        )
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return refuse


def _refusal_handler(
    handler: grpc.RpcMethodHandler, method: str, reason: str, request_id: str
) -> grpc.RpcMethodHandler:
    """A handler of the same kind that answers UNAUTHENTICATED. No deserializer: bytes from
    an unauthenticated caller are never parsed."""
    refuse: Any = _refusal(method, reason, request_id)

    # Streaming responses need an async generator: the tracing interceptor iterates them.
    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await refuse(request, context)
        yield  # never reached: abort raises

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse)


class ContextInterceptor(grpc.aio.ServerInterceptor):
    """Refuses unsigned or forged calls with UNAUTHENTICATED; sets request id and principal
    from the verified metadata, logs one line per call, maps errors.

    Health and reflection calls are neither authenticated nor logged: probes carry no
    token, and would drown out real traffic.
    """

    def __init__(self, verifier: TokenVerifier) -> None:
        self._verifier = verifier

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        # grpc returns None here for unknown methods, whatever the stubs say.
        handler: grpc.RpcMethodHandler | None = await continuation(handler_call_details)
        if handler is None:
            return handler  # type: ignore[return-value]
        method = handler_call_details.method
        quiet = method.startswith(UNAUTHENTICATED_PREFIXES)
        metadata: Sequence[tuple[str, Any]] = tuple(handler_call_details.invocation_metadata or ())
        principal: requestctx.Principal | None = None
        request_id: str | None = None
        if not quiet:
            try:
                claims = verified_claims(self._verifier, metadata, method)
            except InvalidToken as err:
                given = next(
                    (v for k, v in metadata if k == requestctx.REQUEST_ID_HEADER and v), None
                )
                rid = given if isinstance(given, str) else requestctx.new_request_id()
                return _refusal_handler(handler, method, str(err), rid)
            request_id = claims.request_id
            if claims.principal:
                principal = requestctx.Principal(claims.principal, claims.admin)
        # No service defines a streaming method; the health watch and reflection streams,
        # exempt above, run without request context.
        if handler.request_streaming or handler.response_streaming:
            return handler

        # grpc-stubs types the handler for the sync API; under grpc.aio it is a coroutine.
        inner_uu: Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]
        inner_uu = handler.unary_unary  # type: ignore[assignment]

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            rid = request_id or requestctx.new_request_id()
            tokens = (requestctx.set_request_id(rid), requestctx.set_principal(principal))
            start = time.perf_counter()
            code = grpc.StatusCode.OK
            try:
                return await inner_uu(request, context)
            except DomainError as err:
                code = err.code
                if err.reason:
                    # The reason as an ErrorInfo in the rich status (and the legacy trailer).
                    trailers = error_trailers(err.code, err.message, err.reason)
                    await context.abort(err.code, err.message, trailers)
                await context.abort(err.code, err.message)
            except grpc.aio.AbortError:
                code = context.code() or grpc.StatusCode.UNKNOWN
                raise
            except Exception as err:
                # A database outage (timeout, lost connection) is UNAVAILABLE with a clear
                # message, not an internal error: the caller may retry once it is back.
                outage = database_outage(err)
                if outage is not None:
                    code = outage.code
                    log.warning("database unavailable", extra={"method": method, "error": str(err)})
                    trailers = error_trailers(outage.code, outage.message, DATABASE_UNAVAILABLE)
                    await context.abort(outage.code, outage.message, trailers)
                # A database whose disk is full: RESOURCE_EXHAUSTED disk_full (REST 507).
                full = disk_error(err)
                if full is not None:
                    code = full.code
                    log.warning("database disk full", extra={"method": method, "error": str(err)})
                    trailers = error_trailers(full.code, full.message, DISK_FULL)
                    await context.abort(full.code, full.message, trailers)
                code = grpc.StatusCode.INTERNAL
                log.exception("unhandled error", extra={"method": method})
                await context.abort(grpc.StatusCode.INTERNAL, "internal error")
            finally:
                if not quiet:
                    log.info(
                        "rpc",
                        extra={
                            "request_id": rid,
                            "method": method,
                            "code": code.name,
                            "ms": round((time.perf_counter() - start) * 1000, 2),
                        },
                    )
                requestctx.reset_principal(tokens[1])
                requestctx.reset_request_id(tokens[0])

        return grpc.unary_unary_rpc_method_handler(
            unary_unary,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

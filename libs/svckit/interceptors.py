"""Server-side request context, access logging and domain-error mapping for grpc.aio."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from svckit import requestctx
from svckit.errors import REASON_METADATA_KEY, DomainError

log = logging.getLogger("svckit.access")

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]]


def _metadata_value(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for item_key, value in details.invocation_metadata or ():
        if item_key == key:
            return value if isinstance(value, str) else value.decode()
    return None


class ContextInterceptor(grpc.aio.ServerInterceptor):
    """Sets request id and principal from metadata, logs one line per call, maps errors.

    Health and reflection calls are not logged: probes would drown out real traffic.
    """

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        # grpc returns None here for unknown methods, whatever the stubs say.
        handler: grpc.RpcMethodHandler | None = await continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler  # type: ignore[return-value]
        method = handler_call_details.method
        quiet = method.startswith(("/grpc.health.", "/grpc.reflection."))
        request_id = _metadata_value(handler_call_details, requestctx.REQUEST_ID_HEADER)
        principal_id = _metadata_value(handler_call_details, requestctx.PRINCIPAL_HEADER)
        admin = _metadata_value(handler_call_details, requestctx.ADMIN_HEADER) == "1"
        principal = requestctx.Principal(principal_id, admin) if principal_id else None

        if handler.unary_unary is not None:
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
                        context.set_trailing_metadata(((REASON_METADATA_KEY, err.reason),))
                    await context.abort(err.code, err.message)
                except grpc.aio.AbortError:
                    code = context.code() or grpc.StatusCode.UNKNOWN
                    raise
                except Exception:
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
        return handler

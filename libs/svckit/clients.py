"""gRPC client helpers: channels that sign every call, carry request context and tracing, and
set a default deadline."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc
from opentelemetry.sdk.trace import TracerProvider

from svckit import requestctx
from svckit.internal_auth import AUTH_HEADER, Claims, TokenSigner
from svckit.telemetry import client_interceptors

# Headers the signing interceptor owns: whatever a caller put there is replaced by the
# values it signed, so what travels is exactly what the token covers.
_SIGNED_HEADERS = frozenset(
    {
        requestctx.REQUEST_ID_HEADER,
        requestctx.PRINCIPAL_HEADER,
        requestctx.ADMIN_HEADER,
        AUTH_HEADER,
    }
)


def _first(metadata: Sequence[tuple[str, Any]], key: str) -> str | None:
    for item_key, value in metadata:
        if item_key == key:
            return value if isinstance(value, str) else bytes(value).decode()
    return None


def call_claims(metadata: Sequence[tuple[str, Any]]) -> Claims:
    """Whom a call acts for: the caller's explicit principal metadata (tests, the operator
    CLI), else the request being handled (the gateway, a service calling a peer), else
    nobody. A request id is always present, generated when there is none to pass on."""
    explicit_principal = _first(metadata, requestctx.PRINCIPAL_HEADER)
    explicit_admin = _first(metadata, requestctx.ADMIN_HEADER)
    if explicit_principal is not None or explicit_admin is not None:
        principal = explicit_principal or ""
        admin = explicit_admin == "1"
    else:
        current = requestctx.current_principal()
        principal = current.id if current is not None else ""
        admin = current.admin if current is not None else False
    request_id = (
        _first(metadata, requestctx.REQUEST_ID_HEADER)
        or requestctx.current_request_id()
        or requestctx.new_request_id()
    )
    # Without a principal the admin flag means nothing; services read it the same way.
    return Claims(principal, admin and bool(principal), request_id)


def call_method(method: str | bytes) -> str:
    """The full method name of a call; grpc.aio hands client interceptors bytes."""
    return method.decode() if isinstance(method, bytes) else method


def signed_metadata(
    signer: TokenSigner, claims: Claims, method: str, others: Iterable[tuple[str, Any]] = ()
) -> list[tuple[str, Any]]:
    """`others` plus the request id, principal, admin flag and a token covering them, good
    for one call of `method` (`/package.Service/Method`) and no other."""
    metadata = [kv for kv in others if kv[0] not in _SIGNED_HEADERS]
    metadata.append((requestctx.REQUEST_ID_HEADER, claims.request_id))
    if claims.principal:
        metadata.append((requestctx.PRINCIPAL_HEADER, claims.principal))
        metadata.append((requestctx.ADMIN_HEADER, "1" if claims.admin else "0"))
    metadata.append((AUTH_HEADER, signer.sign(claims, method)))
    return metadata


class _Signing:
    """What every kind of call's interceptor does to the call before it leaves."""

    def __init__(self, signer: TokenSigner, default_timeout_s: float) -> None:
        self._signer = signer
        self._default_timeout_s = default_timeout_s

    def _signed(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        given = list(details.metadata or ())
        method = call_method(details.method)
        metadata = signed_metadata(self._signer, call_claims(given), method, given)
        timeout = details.timeout
        if timeout is None:
            timeout = self._default_timeout_s
        return grpc.aio.ClientCallDetails(
            method=details.method,
            timeout=timeout,
            metadata=grpc.aio.Metadata(*metadata),
            credentials=details.credentials,
            wait_for_ready=details.wait_for_ready,
        )


class ContextClientInterceptor(_Signing, grpc.aio.UnaryUnaryClientInterceptor):
    """Signs each call with its method, principal and request id (a token per call: one
    made for a call is refused on any other method), and sets a deadline when the caller
    set none (a hung peer must not hang every caller)."""

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self._signed(client_call_details), request)


# grpc.aio files each interceptor under the first call kind it implements, so each kind of
# streaming call needs an interceptor object of its own.
class _UnaryStreamSigning(_Signing, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(self._signed(client_call_details), request)


class _StreamUnarySigning(_Signing, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request_iterator: Any,
    ) -> Any:
        return await continuation(self._signed(client_call_details), request_iterator)


class _StreamStreamSigning(_Signing, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request_iterator: Any,
    ) -> Any:
        return await continuation(self._signed(client_call_details), request_iterator)


def signing_interceptors(signer: TokenSigner, default_timeout_s: float) -> list[Any]:
    """Interceptors that sign every call of a channel, unary or streaming, each with a token
    of its own for its own method (the health watch stream included)."""
    return [
        ContextClientInterceptor(signer, default_timeout_s),
        _UnaryStreamSigning(signer, default_timeout_s),
        _StreamUnarySigning(signer, default_timeout_s),
        _StreamStreamSigning(signer, default_timeout_s),
    ]


def dial(
    target: str,
    *,
    signer: TokenSigner,
    default_timeout_s: float = 10.0,
    tracer_provider: TracerProvider | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.aio.Channel:
    """An insecure channel to a peer inside the cluster whose every call is signed.

    Transport encryption is left to the network (a mesh, or one host): the token proves who
    sent a call, not that nobody read it. `options` add to or override the defaults below.
    """
    interceptors: list[Any] = [
        *signing_interceptors(signer, default_timeout_s),
        *client_interceptors(tracer_provider),
    ]
    defaults: dict[str, Any] = {
        # With a headless Service, DNS returns every replica; round_robin spreads calls
        # over them instead of pinning each caller to the first address.
        "grpc.lb_policy_name": "round_robin",
        # gRPC's default reconnect backoff grows to 120 s; a peer that restarts (the
        # embedder after an outage) should be found again within seconds.
        "grpc.max_reconnect_backoff_ms": 5000,
        "grpc.initial_reconnect_backoff_ms": 200,
        "grpc.max_receive_message_length": 64 * 1024 * 1024,
        "grpc.max_send_message_length": 64 * 1024 * 1024,
    }
    defaults.update(options)
    return grpc.aio.insecure_channel(
        target, interceptors=interceptors, options=list(defaults.items())
    )

"""The internal secret every test service and test client shares, in one place.

Services read it from their environment (`with_secret` adds it to a settings dict); clients
sign with `SIGNER`, through `signed_channel` for grpc.aio (each call signed for its own
method) or `signed_metadata` for one plain synchronous call of a named method. Metadata
tuples such as `(("x-cograph-principal", "root"), ("x-cograph-admin", "1"))` passed to a
signed channel are signed as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import pytest

from svckit import clients, requestctx
from svckit.config import INTERNAL_SECRET_FILE_VAR, INTERNAL_SECRET_VAR
from svckit.internal_auth import Claims, TokenSigner

TEST_SECRET = "test-internal-secret-of-at-least-32-bytes-0123456789"
SIGNER = TokenSigner(TEST_SECRET.encode())
# Test calls set their own deadlines; a channel's default only stops a forgotten one from
# hanging the session.
_DEFAULT_TIMEOUT_S = 300.0


def with_secret(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with the test secret in place of any secret it names (a developer's shell
    may carry COGRAPH_INTERNAL_SECRET_FILE; both variables at once is a start-up error)."""
    merged = {k: v for k, v in environ.items() if k != INTERNAL_SECRET_FILE_VAR}
    merged[INTERNAL_SECRET_VAR] = TEST_SECRET
    return merged


def use_test_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test secret for code that reads os.environ (the CLI's handlers, in process)."""
    monkeypatch.delenv(INTERNAL_SECRET_FILE_VAR, raising=False)
    monkeypatch.setenv(INTERNAL_SECRET_VAR, TEST_SECRET)


def signed_channel(target: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """A plain channel whose calls are signed. Not svckit's dial: its tracing interceptor
    waits for each call to end inside the interceptor, so cancelling a call there would not
    reach the server, and tests of cancellation need it to."""
    interceptors = clients.signing_interceptors(SIGNER, _DEFAULT_TIMEOUT_S)
    return grpc.aio.insecure_channel(target, interceptors=interceptors, options=list(options))


def signed_metadata(
    method: str, principal: str = "", admin: bool = False, signer: TokenSigner = SIGNER
) -> tuple[tuple[str, str], ...]:
    """Metadata for one call of `method` (`/package.Service/Method`) made without a signed
    channel (a synchronous channel, grpcurl); the token is refused on any other method."""
    claims = Claims(principal, admin and bool(principal), requestctx.new_request_id())
    return tuple(clients.signed_metadata(signer, claims, method))

"""Short-lived tokens that prove an internal call's principal came from a holder of the secret.

The gateway (after checking an API key), the operator CLI and the services themselves sign
every gRPC call with a secret shared by the deployment; every service verifies the token
before a handler runs, so a process that can merely reach a service's port cannot claim to
be someone else, or admin.

A token is `v2.<expiry unix seconds>.<hex HMAC-SHA256>`, sent in `x-cograph-auth`. The MAC
covers the version, the full gRPC method the call is for (`/package.Service/Method`, which
names the service too), the principal id, the admin flag, the expiry and the request id.
The principal, admin flag and request id travel in their own headers; the method is the
one the server is asked to run, so a token is good for one method only: changing any claim
after signing, or replaying a captured token on another method or another service, breaks
the MAC. The expiry is short: a token copied from a log or a packet capture is useless
within a minute, and meanwhile repeats only the call it was made for. `v1` tokens, which
named no method, are refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

AUTH_HEADER = "x-cograph-auth"
VERSION = "v2"
MIN_SECRET_BYTES = 32
DEFAULT_TTL_S = 60
# Services run on different machines; their clocks may disagree by a few seconds.
DEFAULT_SKEW_S = 10

_TOKEN = re.compile(r"^(?P<version>v[0-9]{1,3})\.(?P<expiry>[0-9]{1,12})\.(?P<mac>[0-9a-f]{64})$")

# A full gRPC method name as grpc passes it to interceptors: /package.Service/Method.
_METHOD = re.compile(r"^/[A-Za-z_][A-Za-z0-9_.]*/[A-Za-z_][A-Za-z0-9_]*$")

Clock = Callable[[], float]


class InvalidToken(Exception):
    """A call's token is missing, malformed, expired or does not match its claims."""


class WeakSecret(ValueError):
    """The shared secret is too short to sign with."""


@dataclass(frozen=True)
class Claims:
    """What a token vouches for: who the call acts for, and which request it belongs to.

    An anonymous call has principal "" and is signed too: an unsigned call is refused even
    when it claims nobody, so the only way to reach a handler is through a secret holder.
    """

    principal: str
    admin: bool
    request_id: str


def _check_secret(secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise WeakSecret(f"the internal secret must be at least {MIN_SECRET_BYTES} bytes")
    return secret


def is_method(method: str) -> bool:
    """Whether `method` is a full gRPC method name, `/package.Service/Method`."""
    return _METHOD.match(method) is not None


def _mac(secret: bytes, version: str, method: str, claims: Claims, expiry: int) -> bytes:
    # Each field is length-prefixed, so no choice of principal or request id can make two
    # different claim sets produce the same signed bytes.
    fields = (
        version,
        method,
        claims.principal,
        "1" if claims.admin else "0",
        str(expiry),
        claims.request_id,
    )
    message = b"".join(b"%d:%b" % (len(f.encode()), f.encode()) for f in fields)
    return hmac.new(secret, message, hashlib.sha256).digest()


class TokenSigner:
    """Makes a token for each outgoing call, for the method that call invokes."""

    def __init__(self, secret: bytes, ttl_s: int = DEFAULT_TTL_S, clock: Clock = time.time):
        self._secret = _check_secret(secret)
        self._ttl_s = ttl_s
        self._clock = clock

    def sign(self, claims: Claims, method: str) -> str:
        """A token good for `claims` on `method` (`/package.Service/Method`) only."""
        if not is_method(method):
            raise ValueError(f"not a full gRPC method name: {method!r}")
        expiry = int(self._clock()) + self._ttl_s
        mac = _mac(self._secret, VERSION, method, claims, expiry)
        return f"{VERSION}.{expiry}.{mac.hex()}"


class TokenVerifier:
    """Checks a token against the claims its call carries and the method it calls; raises
    InvalidToken if it fails.

    A token is accepted until `skew_s` after its expiry, and refused when its expiry lies
    further ahead than `ttl_s + skew_s`: no signer in the deployment mints longer-lived ones.
    """

    def __init__(
        self,
        secret: bytes,
        ttl_s: int = DEFAULT_TTL_S,
        skew_s: int = DEFAULT_SKEW_S,
        clock: Clock = time.time,
    ):
        self._secret = _check_secret(secret)
        self._ttl_s = ttl_s
        self._skew_s = skew_s
        self._clock = clock

    def verify(self, token: str | None, claims: Claims, method: str) -> None:
        """`method` is the one the server is about to run, never a value the caller sent."""
        if not token:
            raise InvalidToken(f"missing {AUTH_HEADER} token")
        match = _TOKEN.match(token)
        if match is None:
            raise InvalidToken(f"malformed {AUTH_HEADER} token")
        if match["version"] != VERSION:
            raise InvalidToken(f"unsupported token version {match['version']!r}")
        if not claims.request_id:
            raise InvalidToken("a signed call must carry a request id")
        if not is_method(method):
            raise InvalidToken(f"not a full gRPC method name: {method!r}")
        expiry = int(match["expiry"])
        # The MAC is checked before the expiry, so a forger learns nothing from the order.
        expected = _mac(self._secret, VERSION, method, claims, expiry)
        if not hmac.compare_digest(expected, bytes.fromhex(match["mac"])):
            raise InvalidToken(
                f"bad token signature (another secret, a token made for a method other than "
                f"{method}, or principal, admin flag or request id changed after signing)"
            )
        now = self._clock()
        if now > expiry + self._skew_s:
            raise InvalidToken(f"token expired {int(now - expiry)} s ago")
        if expiry > now + self._ttl_s + self._skew_s:
            raise InvalidToken("token expiry lies too far in the future")

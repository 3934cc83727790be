"""Paging cursors (files, references, the commons' note listing): the position of the last
row a page returned, signed by the service so that a caller can hand it back but not make
one up.

A cursor is `c1.<body>.<mac>`, both parts unpadded base64url. The body is the JSON
`[kind, position]`; the MAC is an HMAC-SHA256 over the version, the kind, the question the
cursor answers (`scope`: repository, prefix, symbol, or a listing's order and tag) and the
body, keyed with a key derived from the internal secret (so a cursor's MAC is never a valid
internal token, nor the other way round). A cursor from another question, another kind or
another deployment's secret, an edited one, and anything else the service did not issue is
INVALID_ARGUMENT.

Once the MAC holds, the position is still checked field by field against the shape its
caller declares (a path without NUL, a line within PostgreSQL's integer, an id within
bigint or a UUID): a secret that leaked, or a service bug, must not turn a cursor into a
5xx. The position only ever moves a page within what the viewer may read: every statement
applies the access rule, whatever the cursor says.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

from cograph_api import limits
from svckit.errors import InvalidArgument

VERSION: Final = "c1"
# The label that separates the cursor key from every other use of the internal secret.
KEY_LABEL: Final = b"cograph cursor v1"

_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+$")
_REFUSED = "cursor is not one this service returned for this request"

# PostgreSQL's `integer` and `bigint`: a line or an id outside them fails in the driver.
INT4_MAX: Final = 2**31 - 1
INT8_MAX: Final = 2**63 - 1

Field = Callable[[object], bool]


def _is_path(value: object) -> bool:
    """A stored path: text PostgreSQL can hold (no NUL, valid UTF-8, so no lone
    surrogate), not empty, at most PATH_MAX_CHARS. Other control characters are legal in
    git paths and so may be in a path the service itself put in a cursor."""
    if not isinstance(value, str) or not 0 < len(value) <= limits.PATH_MAX_CHARS:
        return False
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def int_field(low: int, high: int) -> Field:
    """An integer (not a bool, not a float) in [low, high]."""

    def check(value: object) -> bool:
        return type(value) is int and low <= value <= high

    return check


def _is_uuid(value: object) -> bool:
    """A UUID in its canonical text form (a row id of the commons)."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


PATH_FIELD: Final[Field] = _is_path
UUID_FIELD: Final[Field] = _is_uuid
LINE: Final = int_field(0, INT4_MAX)
ROW_ID: Final = int_field(0, INT8_MAX)


def derive_key(internal_secret: bytes) -> bytes:
    """The cursor key: an HMAC of a fixed label under the internal secret (HKDF-Expand with
    one block). Internal tokens are keyed with the secret itself, so the two never mix."""
    return hmac.new(internal_secret, KEY_LABEL, hashlib.sha256).digest()


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _b64decode(text: str) -> bytes:
    # Only the URL-safe alphabet (the lenient decoder skips other characters), and only the
    # one spelling we write: the unused bits of a last character must be zero, so no two
    # cursors decode to the same bytes.
    if not _BASE64URL.match(text):
        raise ValueError("not base64url")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64encode(raw) != text:
        raise ValueError("not canonical base64url")
    return raw


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class CursorCodec:
    """Signs positions into cursors and reads them back, for one deployment's secret."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("a cursor key is at least 32 bytes")
        self._key = key

    @classmethod
    def from_secret(cls, internal_secret: bytes) -> CursorCodec:
        return cls(derive_key(internal_secret))

    def _mac(self, kind: str, scope: str, body: bytes) -> bytes:
        # Length-prefixed fields: no choice of scope can shift bytes into the body.
        fields = (VERSION.encode(), kind.encode(), scope.encode("utf-8", "surrogatepass"), body)
        message = b"".join(b"%d:%b" % (len(f), f) for f in fields)
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def encode(self, kind: str, scope: str, position: Sequence[object]) -> str:
        """A cursor for `position` in the answer to (`kind`, `scope`)."""
        body = json.dumps([kind, list(position)], separators=(",", ":")).encode()
        return f"{VERSION}.{_b64encode(body)}.{_b64encode(self._mac(kind, scope, body))}"

    def decode(
        self, cursor: str, kind: str, scope: str, shape: Sequence[Field]
    ) -> tuple[Any, ...] | None:
        """The position in `cursor`, one value per field of `shape`; None for an empty
        cursor; INVALID_ARGUMENT for anything this service did not issue for this question."""
        if not cursor:
            return None
        if len(cursor) > limits.CURSOR_MAX_CHARS:
            raise InvalidArgument(f"cursor is at most {limits.CURSOR_MAX_CHARS} characters")
        parts = cursor.split(".")
        if len(parts) != 3 or parts[0] != VERSION:
            raise InvalidArgument(_REFUSED)
        try:
            body = _b64decode(parts[1])
            mac = _b64decode(parts[2])
        except (ValueError, binascii.Error):
            raise InvalidArgument(_REFUSED) from None
        if not hmac.compare_digest(mac, self._mac(kind, scope, body)):
            raise InvalidArgument(_REFUSED)
        try:
            found = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise InvalidArgument(_REFUSED) from None
        # Signed by us, and still checked: the shape the caller declared, field by field.
        match found:
            case [str(found_kind), list(position)] if found_kind == kind:
                pass
            case _:
                raise InvalidArgument(_REFUSED)
        if len(position) != len(shape) or not all(
            check(value) for check, value in zip(shape, position, strict=True)
        ):
            raise InvalidArgument(_REFUSED)
        return tuple(position)

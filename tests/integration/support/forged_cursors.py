"""Paging cursors an attacker (or a leaked secret) could make for files and references:
the unsigned format the service used to issue, whose checksum anyone could compute, and
cursors correctly signed with the test deployment's secret but holding positions no
statement can take (a line beyond PostgreSQL's integer, a NUL in a path)."""

from __future__ import annotations

import base64
import hashlib
import json

from cograph_api.cursors import CursorCodec
from tests.internal_auth import TEST_SECRET

# Positions that made the statement fail (a 502) when a forged cursor carried them.
HOSTILE_REFS_POSITIONS: list[list[object]] = [
    ["shop/cart.py", 2**70, 1],
    ["shop/cart\x00.py", 1, 1],
    ["shop/cart.py", 1, 2**64],
]
HOSTILE_FILES_POSITIONS: list[list[object]] = [["shop/cart\x00.py"], ["\ud800"], [2**70]]


def refs_scope(repo: str, symbol: str) -> str:
    return f"refs\x00{repo}\x00{symbol}"


def files_scope(repo: str, prefix: str = "") -> str:
    return f"files\x00{repo}\x00{prefix}"


def unsigned(kind: str, scope: str, position: list[object]) -> str:
    """The format before cursors were signed: a SHA-256 of the scope and body, no secret."""
    body = json.dumps([kind, position], separators=(",", ":"))
    tag = hashlib.sha256(f"{scope}\x00{body}".encode()).hexdigest()[:16]
    raw = json.dumps([body, tag], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def signed(kind: str, scope: str, position: list[object]) -> str:
    """A cursor with a valid MAC under the test secret: what a holder of the secret could
    make. The service must still refuse a position of the wrong shape."""
    return CursorCodec.from_secret(TEST_SECRET.encode()).encode(kind, scope, position)


def forgeries(kind: str, scope: str, positions: list[list[object]]) -> list[str]:
    """Each hostile position, unsigned and signed."""
    return [make(kind, scope, p) for p in positions for make in (unsigned, signed)]

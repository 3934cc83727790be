"""Paging cursors: signed with a key derived from the internal secret, bound to their
question, and checked field by field even once the signature holds."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from cograph_api import limits
from cograph_api.cursors import (
    INT4_MAX,
    INT8_MAX,
    KEY_LABEL,
    LINE,
    PATH_FIELD,
    ROW_ID,
    CursorCodec,
    Field,
    derive_key,
)
from svckit.errors import InvalidArgument
from svckit.internal_auth import Claims, TokenSigner

SECRET = b"s" * 32
CODEC = CursorCodec.from_secret(SECRET)
FILES = (PATH_FIELD,)
REFS = (PATH_FIELD, LINE, ROW_ID)
SCOPE = "refs\x00demo\x00Context.invoke"
REFUSED = "cursor is not one this service returned for this request"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _signed(body: bytes, kind: str = "refs", scope: str = SCOPE, key: bytes | None = None) -> str:
    """A cursor with a valid MAC over any body: what a holder of the secret (or a bug in
    the service) could produce; the format is the one cursors.py documents."""
    fields = (b"c1", kind.encode(), scope.encode(), body)
    message = b"".join(b"%d:%b" % (len(f), f) for f in fields)
    mac = hmac.new(key or derive_key(SECRET), message, hashlib.sha256).digest()
    return f"c1.{_b64(body)}.{_b64(mac)}"


def _refused(
    cursor: str, kind: str = "refs", scope: str = SCOPE, shape: tuple[Field, ...] = REFS
) -> str:
    with pytest.raises(InvalidArgument) as caught:
        CODEC.decode(cursor, kind, scope, shape)
    return caught.value.message


def test_a_cursor_round_trips_for_its_question() -> None:
    cursor = CODEC.encode("refs", SCOPE, ["src/x.py", 12, 345])
    assert CODEC.decode(cursor, "refs", SCOPE, REFS) == ("src/x.py", 12, 345)
    files = CODEC.encode("files", "files\x00demo\x00", ["src/x.py"])
    assert CODEC.decode(files, "files", "files\x00demo\x00", FILES) == ("src/x.py",)
    assert CODEC.decode("", "refs", SCOPE, REFS) is None
    # The widest values the statements take still round-trip.
    edge = CODEC.encode("refs", SCOPE, ["p" * limits.PATH_MAX_CHARS, INT4_MAX, INT8_MAX])
    assert CODEC.decode(edge, "refs", SCOPE, REFS) == (
        "p" * limits.PATH_MAX_CHARS,
        INT4_MAX,
        INT8_MAX,
    )
    assert len(edge) <= limits.CURSOR_MAX_CHARS


def test_another_question_kind_or_secret_is_refused() -> None:
    cursor = CODEC.encode("refs", SCOPE, ["src/x.py", 12, 345])
    assert _refused(cursor, scope="refs\x00demo\x00Context.other") == REFUSED
    assert _refused(cursor, scope="refs\x00other\x00Context.invoke") == REFUSED
    assert _refused(cursor, kind="files", shape=FILES) == REFUSED
    other = CursorCodec.from_secret(b"o" * 32)
    with pytest.raises(InvalidArgument, match=REFUSED):
        other.decode(cursor, "refs", SCOPE, REFS)


def test_the_cursor_key_is_not_the_internal_secret() -> None:
    key = derive_key(SECRET)
    assert key == hmac.new(SECRET, KEY_LABEL, hashlib.sha256).digest() and key != SECRET
    # A cursor signed with the secret itself (the internal tokens' key) is refused.
    body = json.dumps(["refs", ["src/x.py", 12, 345]], separators=(",", ":")).encode()
    assert _refused(_signed(body, key=SECRET)) == REFUSED
    # And a cursor's MAC is no internal token's MAC for the same bytes.
    token = TokenSigner(SECRET).sign(Claims("", False, "r"), "/a.B/C").split(".")[-1]
    assert _signed(body).split(".")[-1] != _b64(bytes.fromhex(token))


def test_every_character_of_a_cursor_is_covered() -> None:
    cursor = CODEC.encode("refs", SCOPE, ["src/x.py", 12, 345])
    for index, char in enumerate(cursor):
        # Another base64url character, a character outside the alphabet, and none at all.
        for replacement in ("A" if char != "A" else "B", "+", "/", "=", " ", "é", ""):
            tampered = cursor[:index] + replacement + cursor[index + 1 :]
            assert _refused(tampered) == REFUSED, (index, replacement)
    for tampered in (cursor + "A", cursor + ".", "." + cursor, cursor.upper(), cursor[:-1]):
        assert _refused(tampered) == REFUSED


def test_the_old_unsigned_format_is_refused() -> None:
    # What the service issued before cursors were signed: [body, sha256(scope, body)[:16]].
    body = json.dumps(["refs", ["src/x.py", 12, 345]], separators=(",", ":"))
    tag = hashlib.sha256(f"{SCOPE}\x00{body}".encode()).hexdigest()[:16]
    old = _b64(json.dumps([body, tag]).encode())
    assert _refused(old) == REFUSED


@pytest.mark.parametrize("junk", ["!!!", "AAAA", "e30", "bnVsbA", "c1..", "c1.e30.", "c1.A.A"])
def test_garbage_is_refused(junk: str) -> None:
    assert _refused(junk) == REFUSED


def test_size_is_bounded_at_its_edge() -> None:
    at_limit = "c1." + "A" * (limits.CURSOR_MAX_CHARS - 3)
    assert _refused(at_limit) == REFUSED
    assert "at most" in _refused(at_limit + "A")
    assert str(limits.CURSOR_MAX_CHARS) in _refused("x" * (limits.CURSOR_MAX_CHARS * 100))


@pytest.mark.parametrize(
    "position",
    [
        ["src/x.py", 2**70, 1],  # beyond PostgreSQL integer
        ["src/x.py", INT4_MAX + 1, 1],
        ["src/x.py", -1, 1],
        ["src/x.py", 1, INT8_MAX + 1],  # beyond bigint
        ["src/x.py", 1, -1],
        ["src/\x00x.py", 1, 1],  # NUL: PostgreSQL text cannot hold it
        ["src/\ud800.py", 1, 1],  # a lone surrogate is not UTF-8
        ["", 1, 1],
        ["p" * (limits.PATH_MAX_CHARS + 1), 1, 1],
        ["src/x.py", True, 1],  # a bool is not a line
        ["src/x.py", 1.0, 1],
        ["src/x.py", "1", 1],
        ["src/x.py", None, 1],
        [1, 1, 1],
        ["src/x.py", 1],
        ["src/x.py", 1, 1, 1],
        [],
    ],
)
def test_a_signed_position_of_the_wrong_shape_is_refused(position: list[object]) -> None:
    """Defence in depth: with the secret (a leak, a bug), a cursor still cannot make a
    statement fail; it is a 400 like any other bad cursor."""
    body = json.dumps(["refs", position]).encode()
    assert _refused(_signed(body)) == REFUSED


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",
        b'["refs", ["src/x.py", NaN, 1]]',
        b'["refs", ["src/x.py", Infinity, 1]]',
        b'["files", ["src/x.py", 1, 1]]',  # the kind inside differs from the one asked
        b'{"refs": ["src/x.py", 1, 1]}',
        b'["refs", "src/x.py"]',
        b'["refs", ["src/x.py", 1, 1], "extra"]',
        b"[" * 1000 + b"]" * 1000,
        b'["refs", ["src/x.py", 1' + b"0" * 5000 + b", 1]]",
    ],
)
def test_a_signed_body_that_is_not_a_position_is_refused(body: bytes) -> None:
    if len(_signed(body)) > limits.CURSOR_MAX_CHARS:
        assert "at most" in _refused(_signed(body))
    else:
        assert _refused(_signed(body)) == REFUSED


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        CursorCodec(b"k" * 31)

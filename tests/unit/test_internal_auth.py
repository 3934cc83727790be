"""Internal call tokens, the secret's configuration, and the file `cograph up` keeps it in."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from cograph_cli.internal_secret import ensure_secret_file
from cograph_cli.up import _internal_secret_env
from svckit import requestctx
from svckit.clients import call_claims, signed_metadata
from svckit.config import (
    INTERNAL_SECRET_FILE_VAR,
    INTERNAL_SECRET_VAR,
    ConfigError,
    Env,
    internal_secret,
    operator_internal_secret,
)
from svckit.interceptors import verified_claims
from svckit.internal_auth import (
    AUTH_HEADER,
    Claims,
    InvalidToken,
    TokenSigner,
    TokenVerifier,
    WeakSecret,
)

SECRET = b"k" * 32
OTHER = b"o" * 32
NOW = 1_800_000_000.0
CLAIMS = Claims("alice", False, "req-1")
METHOD = "/cograph.retrieval.v1.RetrievalService/Search"


def signer(secret: bytes = SECRET, at: float = NOW) -> TokenSigner:
    return TokenSigner(secret, clock=lambda: at)


def verifier(at: float = NOW) -> TokenVerifier:
    return TokenVerifier(SECRET, ttl_s=60, skew_s=10, clock=lambda: at)


def test_a_token_verifies_for_the_claims_it_was_made_for() -> None:
    token = signer().sign(CLAIMS, METHOD)
    version, expiry, mac = token.split(".")
    assert (version, int(expiry), len(mac)) == ("v2", int(NOW) + 60, 64)
    verifier().verify(token, CLAIMS, METHOD)
    # Anonymous calls are signed too.
    anonymous = Claims("", False, "req-2")
    verifier().verify(signer().sign(anonymous, METHOD), anonymous, METHOD)


@pytest.mark.parametrize(
    "changed",
    [
        Claims("root", False, "req-1"),  # another principal
        Claims("alice", True, "req-1"),  # admin flag raised
        Claims("alice", False, "req-2"),  # another request id
        Claims("", False, "req-1"),  # principal dropped
    ],
)
def test_changing_any_claim_after_signing_is_refused(changed: Claims) -> None:
    token = signer().sign(CLAIMS, METHOD)
    with pytest.raises(InvalidToken, match="bad token signature"):
        verifier().verify(token, changed, METHOD)


@pytest.mark.parametrize(
    "other",
    [
        "/cograph.retrieval.v1.RetrievalService/DeleteRepository",  # same service
        "/cograph.router.v1.RouterService/Search",  # same method name, another service
        "/cograph.retrieval.v1.RetrievalService/search",  # names are case-sensitive
        "/grpc.health.v1.Health/Check",
    ],
)
def test_a_token_is_good_for_the_method_it_was_made_for_only(other: str) -> None:
    token = signer().sign(CLAIMS, METHOD)
    verifier().verify(token, CLAIMS, METHOD)
    with pytest.raises(InvalidToken, match=f"made for a method other than {other}"):
        verifier().verify(token, CLAIMS, other)


def test_method_and_claims_cannot_trade_bytes() -> None:
    # Length prefixes again: a method's tail cannot pass for the principal's head.
    token = signer().sign(Claims("Xalice", False, "req-1"), "/a.B/C")
    with pytest.raises(InvalidToken):
        verifier().verify(token, Claims("alice", False, "req-1"), "/a.B/CX")


@pytest.mark.parametrize(
    "method", ["", "Search", "/Search", "a.B/C", "/a.B/C/D", "/a.B/", "/a b/C"]
)
def test_only_full_method_names_are_signed_or_checked(method: str) -> None:
    with pytest.raises(ValueError, match="full gRPC method name"):
        signer().sign(CLAIMS, method)
    with pytest.raises(InvalidToken, match="full gRPC method name"):
        verifier().verify(signer().sign(CLAIMS, METHOD), CLAIMS, method)


def test_another_secret_is_refused() -> None:
    with pytest.raises(InvalidToken, match="bad token signature"):
        verifier().verify(signer(OTHER).sign(CLAIMS, METHOD), CLAIMS, METHOD)


def test_expiry_allows_the_skew_and_no_more() -> None:
    token = signer(at=NOW).sign(CLAIMS, METHOD)  # expires at NOW + 60
    verifier(at=NOW + 60 + 10).verify(token, CLAIMS, METHOD)
    with pytest.raises(InvalidToken, match="expired"):
        verifier(at=NOW + 60 + 11).verify(token, CLAIMS, METHOD)


def test_a_token_that_lives_longer_than_any_signer_makes_is_refused() -> None:
    long_lived = TokenSigner(SECRET, ttl_s=3600, clock=lambda: NOW).sign(CLAIMS, METHOD)
    with pytest.raises(InvalidToken, match="too far in the future"):
        verifier().verify(long_lived, CLAIMS, METHOD)
    # A signer whose clock runs a few seconds ahead is still accepted.
    verifier().verify(signer(at=NOW + 9).sign(CLAIMS, METHOD), CLAIMS, METHOD)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "missing"),
        ("", "missing"),
        ("garbage", "malformed"),
        ("v1.123.xyz", "malformed"),
        ("v1.-5." + "0" * 64, "malformed"),
        ("v1.123." + "A" * 64, "malformed"),
        ("v1.123." + "0" * 64 + ".extra", "malformed"),
        ("v3.123." + "0" * 64, "unsupported token version"),
        # The format before tokens named their method: refused, however well signed.
        ("v1.123." + "0" * 64, "unsupported token version 'v1'"),
    ],
)
def test_missing_and_malformed_tokens_are_refused(token: str | None, reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason):
        verifier().verify(token, CLAIMS, METHOD)


def test_a_signed_call_must_carry_a_request_id() -> None:
    claims = Claims("alice", False, "")
    with pytest.raises(InvalidToken, match="request id"):
        verifier().verify(signer().sign(claims, METHOD), claims, METHOD)


def test_field_boundaries_cannot_be_shifted() -> None:
    # Without length prefixes, ("a", "1...") and ("a1", "...") could sign the same bytes.
    first = Claims("ab", False, "cd")
    second = Claims("a", False, "bcd")
    with pytest.raises(InvalidToken):
        verifier().verify(signer().sign(first, METHOD), second, METHOD)


def test_short_secrets_are_refused() -> None:
    with pytest.raises(WeakSecret):
        TokenSigner(b"x" * 31)
    with pytest.raises(WeakSecret):
        TokenVerifier(b"x" * 31)


# --- metadata: what the client signs and what the server reads ----------------------------


def test_explicit_metadata_wins_over_the_request_context() -> None:
    token = requestctx.set_principal(requestctx.Principal("ctx-user", True))
    rid = requestctx.set_request_id("ctx-req")
    try:
        explicit = call_claims([("x-cograph-principal", "root"), ("x-cograph-admin", "1")])
        from_context = call_claims([])
    finally:
        requestctx.reset_request_id(rid)
        requestctx.reset_principal(token)
    assert explicit == Claims("root", True, "ctx-req")
    assert from_context == Claims("ctx-user", True, "ctx-req")
    anonymous = call_claims([])
    assert (anonymous.principal, anonymous.admin) == ("", False)
    assert len(anonymous.request_id) == 32, "a request id is generated for the MAC to cover"
    # An admin flag without a principal means nothing, on both sides.
    assert call_claims([("x-cograph-admin", "1")]).admin is False


def test_signed_metadata_round_trips_through_the_server_reading() -> None:
    claims = Claims("root", True, "req-9")
    metadata = signed_metadata(
        signer(), claims, METHOD, [("x-cograph-auth", "stale"), ("other", "kept")]
    )
    keys = [key for key, _ in metadata]
    assert keys.count(AUTH_HEADER) == 1 and ("other", "kept") in metadata
    assert verified_claims(verifier(), metadata, METHOD) == claims


def test_the_server_refuses_headers_sent_twice() -> None:
    metadata = signed_metadata(signer(), CLAIMS, METHOD)
    doubled = [*metadata, ("x-cograph-principal", "root")]
    with pytest.raises(InvalidToken, match="more than once"):
        verified_claims(verifier(), doubled, METHOD)


def test_an_anonymous_token_cannot_be_reused_to_claim_admin() -> None:
    claims = Claims("", False, "req-3")
    metadata = signed_metadata(signer(), claims, METHOD)
    # Adding an admin flag to an anonymous call changes nothing: no principal, no admin.
    assert verified_claims(verifier(), [*metadata, ("x-cograph-admin", "1")], METHOD).admin is False
    with pytest.raises(InvalidToken):
        verified_claims(verifier(), [*metadata, ("x-cograph-principal", "root")], METHOD)


# --- configuration ------------------------------------------------------------------------


def test_the_secret_comes_from_a_file_or_a_value(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("f" * 40 + "\n")
    assert internal_secret(Env({INTERNAL_SECRET_FILE_VAR: str(path)})) == b"f" * 40
    assert internal_secret(Env({INTERNAL_SECRET_VAR: " " + "v" * 32 + " "})) == b"v" * 32


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({}, INTERNAL_SECRET_FILE_VAR),
        ({INTERNAL_SECRET_VAR: "short"}, INTERNAL_SECRET_VAR),
        ({INTERNAL_SECRET_FILE_VAR: "/nonexistent/secret"}, INTERNAL_SECRET_FILE_VAR),
        ({INTERNAL_SECRET_FILE_VAR: "/x", INTERNAL_SECRET_VAR: "v" * 32}, "both set"),
    ],
)
def test_a_missing_short_or_unreadable_secret_names_the_variable(
    environ: dict[str, str], names: str
) -> None:
    with pytest.raises(ConfigError, match=names):
        internal_secret(Env(environ))


def test_a_short_secret_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("too short\n")
    with pytest.raises(ConfigError, match=f"{INTERNAL_SECRET_FILE_VAR}.*at least 32 bytes"):
        internal_secret(Env({INTERNAL_SECRET_FILE_VAR: str(path)}))


def test_operator_commands_fall_back_to_the_data_directory(tmp_path: Path) -> None:
    environ = {"COGRAPH_DATA_DIR": str(tmp_path)}
    with pytest.raises(ConfigError, match="cograph up"):
        operator_internal_secret(Env(environ))
    path = ensure_secret_file(tmp_path)
    assert operator_internal_secret(Env(environ)) == path.read_bytes().strip()
    # A variable wins over the file.
    chosen = {**environ, INTERNAL_SECRET_VAR: "c" * 32}
    assert operator_internal_secret(Env(chosen)) == b"c" * 32


# --- the file `cograph up` writes ---------------------------------------------------------


def test_the_secret_file_is_private_random_and_reused(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # the most permissive umask must not widen the file
    try:
        path = ensure_secret_file(tmp_path)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text().strip()
    assert len(text) == 64 and int(text, 16) >= 0, "32 random bytes, hex"
    assert ensure_secret_file(tmp_path) == path and path.read_text().strip() == text
    assert not list(tmp_path.glob(".internal.secret.*")), "no temporary file left behind"
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert ensure_secret_file(other).read_text() != path.read_text()


def test_a_readable_secret_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "internal.secret"
    path.write_text("p" * 64 + "\n")
    path.chmod(0o644)
    assert ensure_secret_file(tmp_path) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "p" * 64 + "\n"


def test_concurrent_first_runs_agree_on_one_secret(tmp_path: Path) -> None:
    results: list[str] = []
    start = threading.Barrier(8)

    def create() -> None:
        start.wait()
        results.append(ensure_secret_file(tmp_path).read_text())

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and len(set(results)) == 1
    assert not list(tmp_path.glob(".internal.secret.*"))


def test_cograph_up_hands_children_the_data_directory_secret(tmp_path: Path) -> None:
    first = _internal_secret_env({}, tmp_path)
    path = Path(first[INTERNAL_SECRET_FILE_VAR])
    assert path == tmp_path / "internal.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    made = path.read_text()
    # A later run reuses it: services started earlier and operators' commands still agree.
    assert _internal_secret_env({}, tmp_path) == first and path.read_text() == made
    # A configured secret is the children's (they inherit it), and no file is needed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _internal_secret_env({INTERNAL_SECRET_VAR: "g" * 32}, elsewhere) == {}
    assert not (elsewhere / "internal.secret").exists()
    with pytest.raises(ConfigError, match=INTERNAL_SECRET_VAR):
        _internal_secret_env({INTERNAL_SECRET_VAR: "short"}, elsewhere)

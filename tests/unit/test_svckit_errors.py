"""The reason of a failed call: a google.rpc.ErrorInfo in grpc-status-details-bin first,
the legacy x-cograph-reason trailer after (ADR 0008)."""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from gateway.errors import from_grpc
from svckit.errors import (
    ERROR_DOMAIN,
    REASON_METADATA_KEY,
    error_info,
    error_trailers,
    reason_of,
)

DETAILS_KEY = "grpc-status-details-bin"
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


def _error(
    trailing: tuple[tuple[str, Any], ...],
    code: grpc.StatusCode = UNAVAILABLE,
    details: str = "the embedder is down",
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        code,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(*trailing),
        details=details,
        debug_error_string="",
    )


def _rich(
    reason: str, domain: str = ERROR_DOMAIN, code: int = 14, message: str = "the embedder is down"
) -> tuple[str, bytes]:
    status = status_pb2.Status(code=code, message=message)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain=domain))
    return (DETAILS_KEY, status.SerializeToString())


def test_the_error_info_reason_is_read() -> None:
    err = _error((_rich("semantic_search_unavailable"),))
    assert reason_of(err) == "semantic_search_unavailable"
    info = error_info(err)
    assert info is not None and info.domain == ERROR_DOMAIN


def test_the_legacy_trailer_is_read_when_there_is_no_error_info() -> None:
    assert reason_of(_error(((REASON_METADATA_KEY, "own_post_vote"),))) == "own_post_vote"
    assert error_info(_error(((REASON_METADATA_KEY, "own_post_vote"),))) is None


def test_the_error_info_wins_over_the_legacy_trailer() -> None:
    both = (_rich("database_unavailable"), (REASON_METADATA_KEY, "something_older"))
    assert reason_of(_error(both)) == "database_unavailable"


def test_no_reason_at_all() -> None:
    assert reason_of(_error(())) is None
    assert reason_of(_error((("other-key", "x"),))) is None


def test_error_info_of_another_domain_or_a_mismatched_status_is_ignored() -> None:
    foreign = _rich("RATE_LIMIT_EXCEEDED", domain="googleapis.com")
    assert reason_of(_error((foreign,))) is None
    assert reason_of(_error((foreign, (REASON_METADATA_KEY, "legacy")))) == "legacy"
    # A status whose code or message differ from the call's is not the call's status.
    wrong_code = _rich("semantic_search_unavailable", code=5)
    assert reason_of(_error((wrong_code,))) is None
    wrong_message = _rich("semantic_search_unavailable", message="something else")
    assert reason_of(_error((wrong_message,))) is None
    garbage = (DETAILS_KEY, b"\xff\xff not a status")
    assert reason_of(_error((garbage, (REASON_METADATA_KEY, "legacy")))) == "legacy"


def test_error_trailers_round_trip() -> None:
    trailers = error_trailers(UNAVAILABLE, "the embedder is down", "semantic_search_unavailable")
    keys = [key for key, _ in trailers]
    assert keys == [DETAILS_KEY, REASON_METADATA_KEY]  # one set: aio keeps only the last
    err = _error(trailers)
    assert reason_of(err) == "semantic_search_unavailable"
    info = error_info(err)
    assert info is not None and dict(info.metadata) == {}
    with_metadata = error_trailers(UNAVAILABLE, "m", "r", {"stream": "vector"})
    info = error_info(_error(with_metadata, details="m"))
    assert info is not None and dict(info.metadata) == {"stream": "vector"}


def test_the_gateway_maps_the_error_info_reason_to_the_error_code() -> None:
    mapped = from_grpc(_error((_rich("semantic_search_unavailable"),)))
    assert (mapped.status, mapped.error) == (503, "semantic_search_unavailable")
    assert mapped.detail == "the embedder is down"

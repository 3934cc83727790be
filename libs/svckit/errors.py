"""Domain errors and their gRPC status codes.

Domain code raises these; the server interceptor turns them into statuses, so servicers stay
free of grpc plumbing and no stack trace ever reaches a caller.
"""

from __future__ import annotations

import grpc


class DomainError(Exception):
    """Base of errors that map to a gRPC status; the message is shown to the caller."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        # A stable machine-readable reason (e.g. semantic_search_unavailable) for gateways.
        self.reason = reason


class InvalidArgument(DomainError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(DomainError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(DomainError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(DomainError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(DomainError):
    code = grpc.StatusCode.UNAUTHENTICATED


class FailedPrecondition(DomainError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(DomainError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(DomainError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class ResourceExhausted(DomainError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


# Trailing metadata key carrying DomainError.reason.
REASON_METADATA_KEY = "x-cograph-reason"

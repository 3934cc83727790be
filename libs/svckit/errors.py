"""Domain errors and their gRPC status codes.

Domain code raises these; the server interceptor turns them into statuses, so servicers stay
free of grpc plumbing and no stack trace ever reaches a caller.
"""

from __future__ import annotations

import asyncpg
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

DATABASE_UNAVAILABLE = "database_unavailable"


class DatabaseUnavailable(Unavailable):
    """The database did not answer in time or the connection to it was lost."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason=DATABASE_UNAVAILABLE)


def _raised_by_asyncpg(err: BaseException) -> bool:
    """Whether the exception was raised inside asyncpg (its traceback ends there), which
    tells a database timeout or socket error from any other TimeoutError or OSError."""
    tb = err.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith("asyncpg"):
            return True
        tb = tb.tb_next
    return False


def database_outage(err: BaseException) -> DatabaseUnavailable | None:
    """The DatabaseUnavailable that `err` amounts to, or None when it is no database outage.

    Outages are: our own acquisition deadline, asyncpg's client-side statement deadline, the
    server cancelling a statement at statement_timeout, a server shutting down or starting
    up, and a connection that broke or could not be opened. Errors in the SQL itself (a
    constraint, a syntax error) are not: they stay what they are. Exception groups (a
    TaskGroup of concurrent queries) count when any member does.
    """
    if isinstance(err, DatabaseUnavailable):
        return err
    if isinstance(err, BaseExceptionGroup):
        for member in err.exceptions:
            found = database_outage(member)
            if found is not None:
                return found
        return None
    if isinstance(err, asyncpg.QueryCanceledError):
        return DatabaseUnavailable(f"the database cancelled a statement: {err}")
    if isinstance(
        err,
        asyncpg.PostgresConnectionError  # class 08, and a connection closed mid-statement
        | asyncpg.CannotConnectNowError  # starting up or in recovery
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError,
    ):
        return DatabaseUnavailable(f"the database connection failed: {err}")
    if isinstance(err, asyncpg.InterfaceError) and "connection is closed" in str(err):
        return DatabaseUnavailable("the database connection was closed")
    if isinstance(err, TimeoutError) and _raised_by_asyncpg(err):
        return DatabaseUnavailable("the database did not answer in time")
    if isinstance(err, OSError) and _raised_by_asyncpg(err):
        return DatabaseUnavailable(f"the database cannot be reached: {err}")
    return None


def as_domain_error(err: BaseException) -> DomainError | None:
    """The DomainError a servicer's exception maps to, or None (an internal error)."""
    if isinstance(err, DomainError):
        return err
    return database_outage(err)

"""Domain errors and their gRPC status codes, and the reason that travels with them.

Domain code raises these; the server interceptor turns them into statuses, so servicers stay
free of grpc plumbing and no stack trace ever reaches a caller.

A DomainError's reason (a stable machine-readable string such as
semantic_search_unavailable) goes on the wire as the standard gRPC rich error (ADR 0008): a
`google.rpc.Status` in the `grpc-status-details-bin` trailer, with the same code and message
as the call's status and one `google.rpc.ErrorInfo` detail (reason, domain "cograph.dev").
For one release the reason is also sent as the `x-cograph-reason` trailer, which older
clients read. `reason_of` reads it back, ErrorInfo first.
"""

from __future__ import annotations

from typing import Any, cast

import asyncpg
import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status


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


# The ErrorInfo domain of every reason Cograph's services send.
ERROR_DOMAIN = "cograph.dev"
# Legacy trailing metadata key carrying DomainError.reason; sent beside the ErrorInfo for one
# release (ADR 0008), then dropped.
REASON_METADATA_KEY = "x-cograph-reason"


def error_trailers(
    code: grpc.StatusCode, message: str, reason: str, metadata: dict[str, str] | None = None
) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata of an error with a reason, for `context.abort(code, message,
    ...)`: the rich `google.rpc.Status` (same code and message, one ErrorInfo) and the legacy
    reason key. All in one set: grpc.aio keeps only the last trailers a call is given."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=metadata)
    status = status_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(info)
    rich = rpc_status.to_status(status).trailing_metadata
    return (*rich, (REASON_METADATA_KEY, reason))


def error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo of Cograph's domain in a failed call's rich status, if it has one. A
    status that does not parse, or whose code or message differ from the call's, is
    ignored (grpc_status refuses it)."""
    try:
        # It reads trailing_metadata(), code() and details(), which AioRpcError has too.
        status = rpc_status.from_call(cast(grpc.Call, err))
    except (ValueError, DecodeError):
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == ERROR_DOMAIN and info.reason:
                return info
    return None


def reason_of(err: grpc.aio.AioRpcError) -> str | None:
    """The machine-readable reason of a failed call: the ErrorInfo's, else the legacy
    `x-cograph-reason` trailer's (servers of the previous release send only that)."""
    info = error_info(err)
    if info is not None:
        return info.reason
    # grpc-stubs types metadata items loosely; at run time each is a (key, value) pair.
    trailing: Any = err.trailing_metadata() or ()
    for key, value in trailing:
        if key == REASON_METADATA_KEY:
            return value if isinstance(value, str) else bytes(value).decode()
    return None


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


# asyncpg's InterfaceError messages that describe a connection (or pool) in no state to
# serve, as a server killed or frozen mid-statement leaves it; not a mistake in the call.
# "another operation is in progress" is what a connection whose statement was abandoned
# at a deadline answers while asyncpg still waits for the server to confirm the cancel.
_CONNECTION_STATES = (
    "connection is closed",
    # "another operation is in progress" / "is cancelling" (InterfaceError), "another
    # operation (N) is in progress" (InternalClientError)
    "another operation",
    '"failed" state',  # InternalClientError: the protocol broke mid-statement
    "pool is closing",
    "pool is closed",
    "connection was closed",
)


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
        | asyncpg.CrashShutdownError
        | asyncpg.TooManyConnectionsError,  # full: connections are freed as others end
    ):
        return DatabaseUnavailable(f"the database connection failed: {err}")
    if isinstance(err, asyncpg.InterfaceError | asyncpg.InternalClientError) and any(
        state in str(err) for state in _CONNECTION_STATES
    ):
        return DatabaseUnavailable(f"the database connection is unusable: {err}")
    if isinstance(err, TimeoutError) and _raised_by_asyncpg(err):
        return DatabaseUnavailable("the database did not answer in time")
    if isinstance(err, OSError) and _raised_by_asyncpg(err):
        return DatabaseUnavailable(f"the database cannot be reached: {err}")
    return None


DISK_FULL = "disk_full"


class DiskFull(ResourceExhausted):
    """Writes are paused until the disk has room again (svckit.disk); REST 507."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason=DISK_FULL)


def disk_error(err: BaseException) -> DiskFull | None:
    """The DiskFull a database error amounts to: PostgreSQL's disk_full (53100), or a file
    it could not extend; None for anything else."""
    if isinstance(err, BaseExceptionGroup):
        for member in err.exceptions:
            found = disk_error(member)
            if found is not None:
                return found
        return None
    if isinstance(err, asyncpg.DiskFullError) or (
        isinstance(err, asyncpg.PostgresError) and "could not extend file" in str(err)
    ):
        first = str(err).splitlines()[0][:200] if str(err) else "disk full"
        return DiskFull(
            f"the database's disk is full ({first}); writes are refused until there is room"
        )
    return None


def as_domain_error(err: BaseException) -> DomainError | None:
    """The DomainError a servicer's exception maps to, or None (an internal error)."""
    if isinstance(err, DomainError):
        return err
    return database_outage(err) or disk_error(err)


def transient_database_error(err: BaseException) -> bool:
    """Whether `err` is a failure a later attempt may well not meet: a database outage (as
    `database_outage` counts them), any asyncpg client-side connection error, too many
    connections, a server starting up, or a deadline (TimeoutError). Exception groups count
    when any member does, and a wrapper counts when the error it wraps does.

    Not transient: errors in the SQL or its data (constraints, syntax, a value of the wrong
    type) and a client configuration error; those fail the same way every time.
    """
    seen: set[int] = set()
    pending: list[BaseException] = [err]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
            continue
        if database_outage(current) is not None:
            return True
        if isinstance(
            current,
            asyncpg.DataError  # the server's class 22: the data itself
            | asyncpg.exceptions._base.DataError  # an argument asyncpg cannot encode
            | asyncpg.ClientConfigurationError
            | asyncpg.exceptions._base.UnsupportedClientFeatureError,
        ):
            return False
        if isinstance(
            current,
            TimeoutError
            | asyncpg.InterfaceError
            | asyncpg.PostgresConnectionError
            | asyncpg.TooManyConnectionsError
            | asyncpg.CannotConnectNowError,
        ):
            return True
        if current.__cause__ is not None:
            pending.append(current.__cause__)
    return False

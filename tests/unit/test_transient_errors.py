"""Which errors are transient (an index job is retried within its attempts), which are a
database outage (503, never 500), how the key lookup reports every database failure, and
the one line a start-up prints for a database it cannot use."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from gateway.keys_store import KeysStore
from svckit.db import database_problem, redacted
from svckit.errors import DatabaseUnavailable, database_outage, transient_database_error

_BUSY = "cannot perform operation: another operation is in progress"
_STATE = "cannot switch to state 1; another operation (2) is in progress"


def _caused(outer: Exception, cause: BaseException) -> Exception:
    outer.__cause__ = cause
    return outer


TRANSIENT: list[tuple[str, Callable[[], BaseException]]] = [
    ("a deadline", TimeoutError),
    ("our acquire deadline", lambda: DatabaseUnavailable("no connection within 5 s")),
    ("a busy connection", lambda: asyncpg.InterfaceError(_BUSY)),
    ("a closed connection", lambda: asyncpg.InterfaceError("connection is closed")),
    ("a broken protocol state", lambda: asyncpg.InternalClientError(_STATE)),
    ("connection lost", lambda: asyncpg.ConnectionDoesNotExistError("closed mid-operation")),
    ("class 08", lambda: asyncpg.PostgresConnectionError("connection failure")),
    ("too many connections", lambda: asyncpg.TooManyConnectionsError("too many clients")),
    ("starting up", lambda: asyncpg.CannotConnectNowError("the database system is starting")),
    ("shutting down", lambda: asyncpg.AdminShutdownError("terminating connection")),
    ("statement_timeout", lambda: asyncpg.QueryCanceledError("canceling statement")),
    (
        "one member of a task group",
        lambda: ExceptionGroup("stages", [ValueError("x"), asyncpg.InterfaceError(_BUSY)]),
    ),
    ("a wrapper of a timeout", lambda: _caused(RuntimeError("embed failed"), TimeoutError())),
]

PERMANENT: list[tuple[str, Callable[[], BaseException]]] = [
    ("a constraint", lambda: asyncpg.UniqueViolationError("duplicate key")),
    ("bad SQL", lambda: asyncpg.PostgresSyntaxError("syntax error")),
    ("bad data (server)", lambda: asyncpg.DataError("invalid input syntax")),
    ("bad data (client)", lambda: asyncpg.exceptions._base.DataError("invalid input")),
    ("a wrong URL", lambda: asyncpg.ClientConfigurationError("invalid DSN")),
    ("a plain bug", lambda: ValueError("no such repository")),
    ("a group of bugs", lambda: ExceptionGroup("stages", [ValueError("x"), KeyError("y")])),
    ("a permission", lambda: asyncpg.InsufficientPrivilegeError("permission denied")),
]


@pytest.mark.parametrize(("what", "make"), TRANSIENT, ids=[t[0] for t in TRANSIENT])
def test_transient(what: str, make: Callable[[], BaseException]) -> None:
    assert transient_database_error(make()), what


@pytest.mark.parametrize(("what", "make"), PERMANENT, ids=[p[0] for p in PERMANENT])
def test_not_transient(what: str, make: Callable[[], BaseException]) -> None:
    assert not transient_database_error(make()), what


def test_a_cycle_of_causes_ends() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert not transient_database_error(first)


@pytest.mark.parametrize(
    "err",
    [
        asyncpg.InterfaceError(_BUSY),
        asyncpg.InternalClientError(_STATE),
        asyncpg.InterfaceError("cannot perform operation: another operation is cancelling"),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    ],
    ids=["busy", "protocol state", "cancelling", "too many"],
)
def test_connection_states_are_an_outage_503_not_500(err: Exception) -> None:
    outage = database_outage(err)
    assert isinstance(outage, DatabaseUnavailable)
    assert outage.reason == "database_unavailable"


def test_other_interface_errors_stay_bugs() -> None:
    # A call that passes the wrong number of arguments is ours to fix: a 500, logged.
    assert database_outage(asyncpg.InterfaceError("the server expects 2 arguments")) is None
    assert database_outage(asyncpg.InternalClientError("unexpected codec")) is None


class _FailingConnection:
    def __init__(self, err: BaseException) -> None:
        self._err = err

    async def fetchrow(self, *_: Any) -> None:
        raise self._err


class _Pool:
    """The one thing KeysStore.authenticate asks of a pool: a connection that fails."""

    def __init__(self, err: BaseException) -> None:
        self._conn = _FailingConnection(err)

    def acquire(self) -> _Pool:
        return self

    async def __aenter__(self) -> _FailingConnection:
        return self._conn

    async def __aexit__(self, *_: object) -> None:
        return None


@pytest.mark.parametrize(
    "err",
    [
        asyncpg.InternalClientError(_STATE),
        asyncpg.InterfaceError(_BUSY),
        asyncpg.UndefinedTableError('relation "api_keys" does not exist'),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
    ],
    ids=["protocol state", "busy", "no table", "reset", "deadline"],
)
def test_every_database_failure_of_the_key_lookup_is_unavailable(err: BaseException) -> None:
    store = KeysStore(_Pool(err))
    with pytest.raises(DatabaseUnavailable, match="the key store is unavailable") as raised:
        asyncio.run(store.authenticate("cg_" + "a" * 43))
    assert raised.value.__cause__ is err


def test_a_bug_in_the_key_lookup_is_not_hidden() -> None:
    store = KeysStore(_Pool(KeyError("admin")))
    with pytest.raises(KeyError):
        asyncio.run(store.authenticate("cg_" + "a" * 43))


def test_database_problems_at_start_are_one_line_and_hide_the_password() -> None:
    url = "postgresql://cograph:hunter2@db.internal:5432/cograph"
    assert redacted(url) == "postgresql://cograph:***@db.internal:5432/cograph"
    assert redacted("postgresql://cograph@db/c") == "postgresql://cograph@db/c"
    cases = [
        (asyncpg.ClientConfigurationError("invalid DSN: scheme"), True),
        (asyncpg.InvalidPasswordError("password authentication failed"), True),
        (asyncpg.InvalidCatalogNameError('database "x" does not exist'), True),
        (ConnectionRefusedError(111, "Connection refused"), False),
        (asyncpg.CannotConnectNowError("starting up"), False),
        (TimeoutError(), False),
    ]
    for err, permanent in cases:
        problem = database_problem(err, url)
        assert problem is not None, err
        assert problem.permanent is permanent, err
        assert "hunter2" not in str(problem) and "\n" not in str(problem)
        assert str(problem).startswith("COGRAPH_DATABASE_URL (postgresql://cograph:***@")
    assert database_problem(ValueError("not about the database"), url) is None

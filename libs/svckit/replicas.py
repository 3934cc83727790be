"""Reads spread over streaming replicas, a principal's own writes read back.

A service given `COGRAPH_DATABASE_READ_URL` (one or more URLs, separated by whitespace:
libpq's own multi-host URLs use commas) sends its read-only requests to those servers and
everything else to the primary. Two things make that safe:

- **Bounded staleness.** A loop asks each replica, every `COGRAPH_REPLICA_CHECK_S`,
  whether it answers, is in recovery, and how far it has replayed, and asks the primary
  for its WAL position. A replica is used only while it has replayed everything the
  primary had written `COGRAPH_REPLICA_MAX_LAG_S` ago; one that fails, stops replaying or
  was promoted is left out until a check finds it well again. With no replica usable,
  reads go to the primary: a replica is never needed for an answer.
- **Read your own writes.** A write that a principal will want to read back (a
  publication of its index job, a grant) records the primary's WAL position after it
  committed, per principal, in a table on the primary (`writes_table`; each service owns
  its own). A read for that principal goes to a replica only when the replica has
  replayed past that position; otherwise to the primary. The lookup is one primary-key
  read on the primary, which every service replica sees the same way, so a write made
  through one process is read back through any other.

Every read says where it was served (`Placement.name`: `primary` or `replica-N`), so an
answer can say what it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
from collections import deque
from dataclasses import dataclass, field

import asyncpg

from svckit.config import ConfigError, Env
from svckit.db import DbTimeouts, create_pool, redacted

log = logging.getLogger(__name__)

PRIMARY = "primary"
# A write every reader must see before reading from a replica (a repository made private
# or deleted): recorded under this name, which no principal can have (principals carry
# no `*`).
EVERYONE = "*"
# A table name is spliced into SQL (identifiers take no parameters): checked here.
_TABLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class ReplicaSettings:
    urls: tuple[str, ...] = ()
    check_s: float = 1.0  # how often each replica and the primary's position are read
    max_lag_s: float = 30.0  # a replica further behind than this is not read from
    pool_size: int = 10

    @classmethod
    def from_env(cls, env: Env, *, pool_size: int) -> ReplicaSettings:
        raw = env.optional_str("COGRAPH_DATABASE_READ_URL") or ""
        urls = tuple(raw.split())
        for url in urls:
            if not url.startswith(("postgres://", "postgresql://")):
                raise ConfigError(
                    "COGRAPH_DATABASE_READ_URL: each URL must start with postgresql://, got "
                    f"{redacted(url)!r} (several URLs are separated by spaces)"
                )
        if len(set(urls)) != len(urls):
            raise ConfigError("COGRAPH_DATABASE_READ_URL: the same URL is given twice")
        return cls(
            urls=urls,
            check_s=env.float("COGRAPH_REPLICA_CHECK_S", cls.check_s, min=0.05, max=60.0),
            max_lag_s=env.float("COGRAPH_REPLICA_MAX_LAG_S", cls.max_lag_s, min=0.0, max=3600.0),
            pool_size=pool_size,
        )


@dataclass(frozen=True)
class Placement:
    """Where one read runs: a pool and its name (`primary`, `replica-1`, ...)."""

    pool: asyncpg.Pool
    name: str

    @property
    def on_replica(self) -> bool:
        return self.name != PRIMARY


@dataclass
class Replica:
    name: str
    url: str
    pool: asyncpg.Pool | None = None
    usable: bool = False
    replayed: int = 0  # the WAL position it had replayed at its last check
    problem: str | None = "not checked yet"


@dataclass
class _PrimaryPositions:
    """The primary's WAL position at each check, oldest first, for the staleness bound."""

    horizon_s: float
    seen: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, at: float, lsn: int) -> None:
        self.seen.append((at, lsn))
        # Keep one entry older than the horizon: the position the bound is measured from.
        while len(self.seen) > 2 and self.seen[1][0] <= at - self.horizon_s:
            self.seen.popleft()

    def required(self, now: float) -> int | None:
        """The position a replica must have replayed to be at most `horizon_s` behind: the
        primary's at the newest check that is at least that old. Until a check is that
        old, the oldest one's (stricter than the bound, never looser); None before any."""
        if not self.seen:
            return None
        result = self.seen[0][1]
        for at, lsn in self.seen:
            if at > now - self.horizon_s:
                break
            result = lsn
        return result


class ReadRouter:
    """Chooses the server for each read; records writes to be read back."""

    def __init__(
        self,
        primary: asyncpg.Pool,
        settings: ReplicaSettings,
        *,
        writes_table: str,
        timeouts: DbTimeouts | None = None,
    ) -> None:
        if not _TABLE.match(writes_table):
            raise ValueError(f"bad table name {writes_table!r}")
        self._primary = primary
        self._settings = settings
        self._table = writes_table
        self._timeouts = timeouts or DbTimeouts()
        self.replicas = [
            Replica(name=f"replica-{n}", url=url) for n, url in enumerate(settings.urls, 1)
        ]
        self._positions = _PrimaryPositions(settings.max_lag_s)
        self._turn = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self.served: dict[str, int] = {PRIMARY: 0} | {r.name: 0 for r in self.replicas}

    @property
    def primary(self) -> Placement:
        return Placement(self._primary, PRIMARY)

    # ---- writes -------------------------------------------------------------------------

    async def wrote(self, principal: str, conn: asyncpg.Connection | None = None) -> None:
        """Records, after a committed write, that `principal` must read from a server that
        has replayed it. Without replicas there is nothing to record."""
        if not self.replicas or not principal:
            return
        sql = (
            f"INSERT INTO {self._table} (principal, lsn, written_at)"
            " VALUES ($1, pg_current_wal_lsn(), now())"
            " ON CONFLICT (principal) DO UPDATE SET lsn = EXCLUDED.lsn,"
            " written_at = EXCLUDED.written_at"
        )
        if conn is not None:
            await conn.execute(sql, principal)
        else:
            await self._primary.execute(sql, principal)

    # ---- reads --------------------------------------------------------------------------

    async def for_read(self, principal: str) -> Placement:
        """A usable replica that has replayed `principal`'s last write, in turn; else the
        primary."""
        candidates = [r for r in self.replicas if r.usable and r.pool is not None]
        if not candidates:
            return self._count(self.primary)
        recorded = await self._primary.fetchval(
            f"SELECT max(lsn) FROM {self._table} WHERE principal = ANY($1::text[])",
            [EVERYONE, principal] if principal else [EVERYONE],
        )
        needed = int(recorded) if recorded is not None else 0
        start = next(self._turn)
        ordered = [candidates[(start + i) % len(candidates)] for i in range(len(candidates))]
        for replica in ordered:
            if replica.replayed >= needed and replica.pool is not None:
                return self._count(Placement(replica.pool, replica.name))
        # Every replica was behind at its last check: ask one again before giving up on it
        # (a write a moment ago is usually replayed within milliseconds).
        replica = ordered[0]
        with contextlib.suppress(Exception):
            replica.replayed = await self._replayed(replica)
            if replica.replayed >= needed and replica.pool is not None:
                return self._count(Placement(replica.pool, replica.name))
        return self._count(self.primary)

    def _count(self, placement: Placement) -> Placement:
        self.served[placement.name] = self.served.get(placement.name, 0) + 1
        return placement

    # ---- health -------------------------------------------------------------------------

    def start(self) -> None:
        if self.replicas and self._task is None:
            self._task = asyncio.create_task(self._watch(), name="replica-watch")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for replica in self.replicas:
            if replica.pool is not None:
                await replica.pool.close()
                replica.pool = None

    async def check(self) -> None:
        """One round: the primary's position, then every replica's state."""
        now = time.monotonic()
        try:
            position = await self._primary.fetchval("SELECT pg_current_wal_lsn()")
            self._positions.add(now, int(position))
        except Exception as err:  # the primary's own health is not this loop's business
            log.warning("replica check: primary position unavailable", extra={"error": str(err)})
        required = self._positions.required(now)
        await asyncio.gather(*(self._check(replica, required) for replica in self.replicas))

    async def _check(self, replica: Replica, required: int | None) -> None:
        was = replica.usable
        try:
            if replica.pool is None:
                replica.pool = await create_pool(
                    replica.url,
                    max_size=self._settings.pool_size,
                    timeouts=self._timeouts,
                )
            in_recovery, replayed = await replica.pool.fetchrow(
                "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()"
            )
            if not in_recovery or replayed is None:
                # Promoted (or never a standby): what it holds may have diverged.
                problem: str | None = "not a standby in recovery"
            else:
                replica.replayed = int(replayed)
                behind = required is not None and replica.replayed < required
                problem = (
                    f"more than {self._settings.max_lag_s:g} s behind the primary"
                    if behind
                    else None
                )
        except Exception as err:
            problem = f"unreachable: {type(err).__name__}"
        replica.problem = problem
        replica.usable = problem is None
        if was != replica.usable:
            log.warning(
                "replica %s",
                "back in use" if replica.usable else "left out",
                extra={"replica": replica.name, "problem": problem},
            )

    async def _replayed(self, replica: Replica) -> int:
        assert replica.pool is not None
        value = await replica.pool.fetchval("SELECT pg_last_wal_replay_lsn()")
        return int(value) if value is not None else 0

    async def _watch(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.check(), timeout=max(5.0, self._settings.check_s * 5))
            except Exception as err:
                log.warning("replica check failed", extra={"error": str(err)})
            await asyncio.sleep(self._settings.check_s)

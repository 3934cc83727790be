"""Free space on the data directory's filesystem, and what a service does when it runs low.

The data directory holds the embedded PostgreSQL, the clones and the logs. When its
filesystem fills, PostgreSQL cannot grow its WAL and panics, and a restart cannot fix that.
So writes stop first: below `COGRAPH_DISK_MIN_FREE_MB` free, requests that would write
(indexing, notes, votes, comments) are refused with RESOURCE_EXHAUSTED and the reason
`disk_full` (REST 507), naming the filesystem and how much is free, and index jobs pause;
reads go on. The check is a statvfs, remembered for `COGRAPH_DISK_CHECK_S`, so space that
returns is seen within that long, with no restart. A database that is not on this machine
(COGRAPH_DATABASE_URL elsewhere) is not watched; its own `disk_full` errors map to the same
answer (svckit.errors.disk_error).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from svckit.config import Env, data_dir
from svckit.errors import DiskFull

_MB = 1024 * 1024


@dataclass(frozen=True)
class DiskSettings:
    path: Path  # a directory on the filesystem to watch (the data directory)
    min_free_bytes: int  # writes stop below this much free space; 0 watches nothing
    check_s: float  # how long a measurement is trusted

    @classmethod
    def from_env(cls, env: Env) -> DiskSettings:
        return cls(
            path=data_dir(env),
            min_free_bytes=env.int("COGRAPH_DISK_MIN_FREE_MB", 256, min=0, max=1_000_000) * _MB,
            check_s=env.float("COGRAPH_DISK_CHECK_S", 2.0, min=0.0, max=300.0),
        )


@dataclass(frozen=True)
class DiskState:
    free_bytes: int
    low: bool

    def describe(self, settings: DiskSettings) -> str:
        return (
            f"{self.free_bytes // _MB} MB free on the filesystem of {settings.path}, below the "
            f"{settings.min_free_bytes // _MB} MB kept free (COGRAPH_DISK_MIN_FREE_MB)"
        )


class DiskWatch:
    def __init__(
        self, settings: DiskSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._measured: tuple[float, DiskState] | None = None

    def state(self) -> DiskState:
        now = self._clock()
        if self._measured is not None and now - self._measured[0] < self.settings.check_s:
            return self._measured[1]
        free = _free_bytes(self.settings.path)
        state = DiskState(free, free < self.settings.min_free_bytes)
        self._measured = (now, state)
        return state

    def require_space(self, what: str) -> None:
        """Raises DiskFull, naming the disk and `what` was refused, when space is low."""
        if self.settings.min_free_bytes <= 0:
            return
        state = self.state()
        if state.low:
            raise DiskFull(
                f"{what} refused: {state.describe(self.settings)}; writes resume by themselves "
                "once there is room again"
            )


def _free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use; a path that does not exist yet is
    measured at its nearest existing parent."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stats = os.statvfs(probe)
    return stats.f_bavail * stats.f_frsize

"""svckit.disk: free space measured, remembered for a while, and writes refused below the
floor with a message naming the disk; PostgreSQL's disk-full errors mapped the same way."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from svckit.config import Env
from svckit.disk import DiskSettings, DiskWatch
from svckit.errors import DISK_FULL, DiskFull, as_domain_error, disk_error

MB = 1024 * 1024


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _settings(path: Path, min_free: int, check_s: float = 5.0) -> DiskSettings:
    return DiskSettings(path, min_free, check_s)


def test_writes_are_refused_below_the_floor_naming_the_disk(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    DiskWatch(_settings(tmp_path, free // 2)).require_space("posting")  # room: no error
    with pytest.raises(DiskFull) as caught:
        DiskWatch(_settings(tmp_path, free + 1024 * MB)).require_space("posting a note")
    message = caught.value.message
    assert caught.value.reason == DISK_FULL
    assert message.startswith("posting a note refused:")
    assert str(tmp_path) in message and "COGRAPH_DISK_MIN_FREE_MB" in message


def test_a_floor_of_zero_watches_nothing(tmp_path: Path) -> None:
    DiskWatch(_settings(tmp_path, 0)).require_space("anything")


def test_a_measurement_is_trusted_for_check_s_then_taken_again(tmp_path: Path) -> None:
    clock = _Clock()
    free = shutil.disk_usage(tmp_path).free
    settings = _settings(tmp_path, free // 2, check_s=5.0)
    watch = DiskWatch(settings, clock=clock)
    first = watch.state()
    assert not first.low
    # The floor is the settings'; a new measurement is taken only after check_s.
    object.__setattr__(settings, "min_free_bytes", free * 2)
    clock.now = 4.9
    assert watch.state() is first
    clock.now = 5.0
    assert watch.state().low


def test_a_missing_directory_is_measured_on_its_parent(tmp_path: Path) -> None:
    watch = DiskWatch(_settings(tmp_path / "not" / "yet", 1))
    assert watch.state().free_bytes > 0


def test_settings_from_the_environment_and_their_edges(tmp_path: Path) -> None:
    env = Env({"COGRAPH_DATA_DIR": str(tmp_path), "COGRAPH_DISK_MIN_FREE_MB": "0"})
    assert DiskSettings.from_env(env) == DiskSettings(tmp_path.resolve(), 0, 2.0)
    defaults = DiskSettings.from_env(Env({"COGRAPH_DATA_DIR": str(tmp_path)}))
    assert defaults.min_free_bytes == 256 * MB
    for bad in ("-1", "1000001", "lots"):
        with pytest.raises(ValueError, match="COGRAPH_DISK_MIN_FREE_MB"):
            DiskSettings.from_env(Env({"COGRAPH_DISK_MIN_FREE_MB": bad}))


def test_postgres_disk_errors_become_disk_full() -> None:
    full = asyncpg.DiskFullError("could not write to file: No space left on device")
    mapped = disk_error(full)
    assert mapped is not None and mapped.reason == DISK_FULL
    assert "No space left on device" in mapped.message
    extend = asyncpg.PostgresError('could not extend file "base/1/2": No space left on device')
    assert disk_error(extend) is not None
    assert disk_error(ExceptionGroup("streams", [ValueError("x"), full])) is not None
    assert disk_error(asyncpg.UniqueViolationError("duplicate key")) is None
    assert isinstance(as_domain_error(full), DiskFull)

"""svckit.replicas' pure parts: the read URLs' parsing and the staleness bound."""

from __future__ import annotations

import pytest

from svckit.config import ConfigError, Env
from svckit.replicas import ReplicaSettings, _PrimaryPositions


def settings(**env: str) -> ReplicaSettings:
    return ReplicaSettings.from_env(Env(env), pool_size=4)


def test_no_read_url_means_no_replica() -> None:
    assert settings().urls == ()
    assert settings(COGRAPH_DATABASE_READ_URL="  ").urls == ()


def test_several_urls_are_separated_by_whitespace_and_multi_host_urls_stay_whole() -> None:
    parsed = settings(
        COGRAPH_DATABASE_READ_URL=(
            "postgresql://u@r1/db postgres://u@r2,r3/db?target_session_attrs=any\n"
            "postgresql://u@/db?host=/run/pg"
        )
    )
    assert parsed.urls == (
        "postgresql://u@r1/db",
        "postgres://u@r2,r3/db?target_session_attrs=any",
        "postgresql://u@/db?host=/run/pg",
    )
    assert parsed.pool_size == 4


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mysql://u@h/db", "must start with postgresql://"),
        ("postgresql://u:secret@h/db,postgresql://u@h2/db", None),  # one multi-host-like URL
        ("postgresql://u@h/db postgresql://u@h/db", "the same URL is given twice"),
        ("postgresql://u:hunter2@h/db ftp://u:hunter2@h", "must start with postgresql://"),
    ],
)
def test_bad_read_urls_stop_the_start_without_their_password(
    value: str, message: str | None
) -> None:
    if message is None:
        assert len(settings(COGRAPH_DATABASE_READ_URL=value).urls) == 1
        return
    with pytest.raises(ConfigError, match=message) as caught:
        settings(COGRAPH_DATABASE_READ_URL=value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [("COGRAPH_REPLICA_CHECK_S", "0"), ("COGRAPH_REPLICA_MAX_LAG_S", "-1")],
)
def test_check_interval_and_lag_bound_have_edges(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        settings(**{name: value})


def test_the_bound_is_the_primarys_position_as_old_as_the_lag() -> None:
    positions = _PrimaryPositions(horizon_s=10)
    assert positions.required(now=0) is None
    for at, lsn in [(0, 100), (4, 200), (8, 300), (12, 400), (16, 500)]:
        positions.add(at, lsn)
    # At 16 a replica must hold what the primary had at 6 or later: the check at 4 is the
    # newest at least 10 s old.
    assert positions.required(now=16) == 200
    assert positions.required(now=18.5) == 300
    # Entries older than needed are dropped, one older than the horizon is kept.
    assert positions.seen[0][0] <= 16 - 10


def test_before_any_check_is_as_old_as_the_lag_the_oldest_one_binds() -> None:
    positions = _PrimaryPositions(horizon_s=30)
    positions.add(0, 100)
    positions.add(1, 150)
    # Stricter than the bound, never looser: a replica that has not replayed the first
    # position seen may be any amount behind.
    assert positions.required(now=2) == 100

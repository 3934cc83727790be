"""The restart policy of `cograph up`: backoff doubling to a cap, reset after a stable run,
giving up after repeated fast crashes."""

from __future__ import annotations

import pytest

from cograph_cli.supervisor import CrashHistory, RestartPolicy, describe_exit
from svckit.config import ConfigError, Env


def test_backoff_doubles_up_to_the_cap() -> None:
    history = CrashHistory(RestartPolicy(backoff_s=0.5, backoff_max_s=4, give_up_crashes=100))
    delays = [history.next_delay(now=i * 100.0, uptime_s=1.0) for i in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_a_stable_run_resets_the_backoff() -> None:
    history = CrashHistory(RestartPolicy(backoff_s=0.5, stable_after_s=30, give_up_crashes=100))
    assert history.next_delay(now=0.0, uptime_s=1.0) == 0.5
    assert history.next_delay(now=10.0, uptime_s=1.0) == 1.0
    assert history.next_delay(now=100.0, uptime_s=45.0) == 0.5  # it had stayed up 45 s


def test_gives_up_after_repeated_fast_crashes_only() -> None:
    policy = RestartPolicy(give_up_crashes=5, give_up_window_s=60)
    history = CrashHistory(policy)
    for i in range(4):
        assert history.next_delay(now=i * 5.0, uptime_s=1.0) is not None
    assert history.next_delay(now=20.0, uptime_s=1.0) is None
    assert history.recent == 5

    spaced = CrashHistory(policy)  # one crash a minute is never five within a minute
    assert all(spaced.next_delay(now=i * 61.0, uptime_s=1.0) is not None for i in range(20))


def test_policy_from_env_and_exit_words() -> None:
    policy = RestartPolicy.from_env(
        Env({"COGRAPH_UP_GIVE_UP_CRASHES": "3", "COGRAPH_UP_RESTART_BACKOFF_S": "0.1"})
    )
    assert (policy.give_up_crashes, policy.backoff_s, policy.backoff_max_s) == (3, 0.1, 30.0)
    with pytest.raises(ConfigError, match="COGRAPH_UP_GIVE_UP_CRASHES"):
        RestartPolicy.from_env(Env({"COGRAPH_UP_GIVE_UP_CRASHES": "0"}))
    assert describe_exit(-9) == "signal 9"
    assert describe_exit(2) == "code 2"

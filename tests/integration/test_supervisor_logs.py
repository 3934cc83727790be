"""The supervisor with a real child process: its output lands in a size-rotated log, and an
exit that says a restart cannot help (2: configuration, 3: environment) is given up on at
once, with the child's own line as the reason; any other exit is restarted."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest

from cograph_cli.services import ServiceSpec
from cograph_cli.supervisor import RestartPolicy, Supervisor
from svckit.logs import LogSettings

pytestmark = pytest.mark.asyncio(loop_scope="session")

KIB = 1024


def _service(root: Path, name: str, code: int) -> ServiceSpec:
    """A module `python -m <name>` that writes about 300 KiB, a last line, and exits."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            for n in range(300):
                print(f"line {{n:04d}} " + "x" * 1013)
            print("{name}: configuration error: SOMETHING: is wrong", file=sys.stderr)
            sys.exit({code})
            """
        )
    )
    return ServiceSpec(name, 0)


def _supervisor(tmp_path: Path, said: list[str]) -> Supervisor:
    return Supervisor(
        tmp_path / "run",
        {**os.environ, "PYTHONPATH": f"{tmp_path / 'mods'}:{os.environ.get('PYTHONPATH', '')}"},
        policy=RestartPolicy(backoff_s=0.05, give_up_crashes=3, give_up_window_s=60),
        report=said.append,
        log_settings=LogSettings(max_bytes=64 * KIB, backups=2),
    )


async def test_a_configuration_exit_is_not_restarted_and_the_log_rotates(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = _supervisor(tmp_path, said)
    child = supervisor.start(_service(tmp_path / "mods", "chatty", 2), 0, {})
    try:
        await asyncio.wait_for(child.settled.wait(), 60)
        assert child.state == "failed" and child.restarts == 0
        assert child.fatal == "chatty: configuration error: SOMETHING: is wrong"
        assert len(said) == 1 and "exited (code 2)" in said[0] and "not restarting" in said[0]
    finally:
        await supervisor.stop()
    run = tmp_path / "run"
    logs = sorted(p.name for p in run.glob("chatty.log*"))
    assert logs == ["chatty.log", "chatty.log.1", "chatty.log.2"], logs  # 300 KiB, 2 kept
    assert all((run / name).stat().st_size < 64 * KIB for name in logs)
    newest = (run / "chatty.log").read_text().splitlines()
    assert newest[-2].startswith("line 0299 ")  # nothing lost at the end, in order
    assert newest[-1] == child.fatal


async def test_any_other_exit_is_a_crash_and_is_restarted(tmp_path: Path) -> None:
    said: list[str] = []
    supervisor = _supervisor(tmp_path, said)
    child = supervisor.start(_service(tmp_path / "mods", "crashy", 1), 0, {})
    try:
        await asyncio.wait_for(child.settled.wait(), 60)
        assert child.state == "failed" and not child.fatal
        assert child.restarts == 2  # 3 crashes: given up by the crash policy
        assert "restarting in" in said[0] and "giving up after 3 crashes" in said[-1]
    finally:
        await supervisor.stop()

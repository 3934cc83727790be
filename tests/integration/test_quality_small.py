"""The retrieval-quality harness in its CI mode, end to end on the embedded stack.

Runs `python -m bench.quality --small` (embedded PostgreSQL in a temp dir, the real
embedder process, the real retrieval service over gRPC) and holds the issue's gate: fused
retrieval is not below the best single stream on any query class, within 3 minutes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.internal_auth import with_secret

REPO_ROOT = Path(__file__).resolve().parents[2]
# The run takes about 160 s on 2 quiet cores; the budget leaves room for a busy machine
# without letting a hung run hold the suite.
BUDGET_S = 300


@pytest.mark.slow
@pytest.mark.timeout(BUDGET_S + 60)
def test_small_mode_fused_is_not_below_any_single_stream(tmp_path: Path) -> None:
    env = with_secret({**os.environ, "COGRAPH_LOG_LEVEL": "WARNING"})
    external = os.environ.get("COGRAPH_TEST_DATABASE_URL")
    if external:  # the same switch the other integration tests honour
        env["COGRAPH_DATABASE_URL"] = external
    started = time.monotonic()
    # Its own process group: on the deadline the run and everything it started (the
    # embedder, PostgreSQL) are killed together, not left behind to load the machine.
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.quality",
            "--small",
            "--no-baselines",
            # The first 60 questions of each class: 240 of the mode's 310, enough for the
            # paired gate (report.fusion_regressions) at a quarter less of the suite's time.
            "--per-class",
            "60",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=BUDGET_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    elapsed = time.monotonic() - started
    results = tmp_path / "results.json"
    assert results.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(results.read_text())
    metrics = data["metrics"]
    assert metrics["fused"]["overall"]["count"] >= 200
    assert set(metrics["fused"]) >= {"symbol", "signature", "semantic", "docs"}
    assert data["run"]["replay_agreement"] >= 0.95, "offline fusion no longer mirrors the RPC"
    assert elapsed < BUDGET_S
    assert (tmp_path / "quality.png").stat().st_size > 0
    # The gate of issue 8 (report.fusion_regressions computes the same from the table).
    assert data["fusion_regressions"] == [], "\n".join(data["fusion_regressions"])
    assert done.returncode == 0, done.stderr[-3000:]

"""Schemathesis against the live gateway's /openapi.json: no generated request, valid or
not, may produce a 5xx. Bounded (6 fuzzed examples an operation beside the coverage phase's
boundary values, fixed seed): about two minutes of the suite's time on two cores.

Indexing operations are excluded: a fuzzer choosing `source` or `directory` would make the
retrieval service read arbitrary server directories; test_gateway_rest covers them.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.integration.support.stacks import gateway_stack

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.slow]

ST = Path(sys.executable).with_name("st")


async def test_no_5xx_under_schemathesis(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    assert ST.exists(), f"{ST} missing: pip install -r requirements-dev.txt (schemathesis)"
    async with gateway_stack(pg_server_url, embedder_address, tmp_path / "stack") as stack:
        key = await stack.key("fuzzer")
        # The server runs in this event loop: the CLI must run without blocking it.
        process = await asyncio.create_subprocess_exec(
            str(ST),
            "run",
            f"{stack.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "6",
            "--seed",
            "20260501",
            "--workers",
            "1",
            "--phases",
            "examples,coverage,fuzzing",
            "--request-timeout",
            "30",
            "--exclude-path",
            "/api/repositories",
            "--exclude-path",
            "/api/collections",
            "--exclude-method",
            "DELETE",
            "--suppress-health-check",
            "all",
            "-H",
            f"Authorization: Bearer {key}",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path / "report"),
            "--no-color",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=240)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-6000:]
    assert "not_a_server_error" in text or "passed" in text.lower(), text[-2000:]

"""A real gRPC client outside Python (grpcurl) sees our services through reflection."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.internal_auth import signed_metadata

pytestmark = pytest.mark.asyncio(loop_scope="session")

GRPCURL = shutil.which("grpcurl", path=str(Path(sys.executable).parent)) or "grpcurl"


async def _grpcurl(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        GRPCURL,
        "-plaintext",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_grpcurl_lists_services(embedder_address: str) -> None:
    listed = (await _grpcurl(embedder_address, "list")).split()
    assert "cograph.embedder.v1.EmbedderService" in listed
    assert "grpc.health.v1.Health" in listed


async def test_grpcurl_describes_and_calls_embed(embedder_address: str) -> None:
    described = await _grpcurl(embedder_address, "describe", "cograph.embedder.v1.EmbedderService")
    assert "rpc Embed" in described and "rpc Info" in described
    # Reflection needs no token; a call does, passed as headers like any other client's.
    signed = signed_metadata("/cograph.embedder.v1.EmbedderService/Embed")
    headers = [arg for key, value in signed for arg in ("-H", f"{key}: {value}")]
    reply = json.loads(
        await _grpcurl(
            *headers,
            "-d",
            '{"texts": ["hello from grpcurl"]}',
            embedder_address,
            "cograph.embedder.v1.EmbedderService/Embed",
        )
    )
    assert reply["dimension"] == 384
    assert len(reply["vectors"][0]["values"]) == 384

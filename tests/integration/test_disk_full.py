"""A nearly full disk, through the real stack: writes stop with 507 naming the disk while
reads go on, a running index job pauses and says why, and everything resumes by itself
once there is room again, without a restart.

The disk is this machine's: the services keep COGRAPH_DISK_MIN_FREE_MB free on the data
directory's filesystem, set to a margin (1 GB, less on a small disk) below what is free when
the test starts, and a ballast file allocated in the data directory (posix_fallocate:
blocks, not writes) takes twice the margin and gives it back; the margin absorbs what other
processes write meanwhile."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.integration.support.git_repos import make_repo
from tests.integration.support.stacks import gateway_stack, wait_job, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")

MB = 1024 * 1024
CHECK_S = 0.2  # COGRAPH_DISK_CHECK_S: how stale a measurement may be


@contextmanager
def _ballast(directory: Path, size: int) -> Iterator[None]:
    path = directory / "ballast"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    try:
        yield
    finally:
        path.unlink()


async def _settle() -> None:
    await asyncio.sleep(CHECK_S * 2)  # past the remembered measurement


def _refused(reply: httpx.Response, data: Path) -> None:
    assert reply.status_code == 507, reply.text
    body = reply.json()
    assert body["error"] == "disk_full"
    assert str(data) in body["detail"] and "COGRAPH_DISK_MIN_FREE_MB" in body["detail"]


async def test_a_nearly_full_disk_stops_writes_and_everything_resumes_alone(
    pg_server_url: str, embedder_address: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    free_mb = shutil.disk_usage(data).free // MB
    margin_mb = min(1024, free_mb // 4)
    assert margin_mb >= 100, f"the test needs at least 400 MB free, not {free_mb} MB"
    keep_mb = free_mb - margin_mb
    ballast = 2 * margin_mb * MB
    service_env = {
        "COGRAPH_DATA_DIR": str(data),
        "COGRAPH_DISK_MIN_FREE_MB": str(keep_mb),
        "COGRAPH_DISK_CHECK_S": str(CHECK_S),
    }
    source = make_repo(tmp_path / "src" / "demo")
    async with (
        gateway_stack(pg_server_url, embedder_address, tmp_path, service_env=service_env) as s,
        s.client(s.admin_key) as admin,
    ):
        posted = await admin.post("/v1/posts", json={"title": "before", "body": "room left"})
        assert posted.status_code == 201, posted.text
        post_id = posted.json()["id"]

        with _ballast(data, ballast):
            await _settle()
            _refused(await admin.post("/v1/posts", json={"title": "t", "body": "b"}), data)
            _refused(await admin.post(f"/v1/posts/{post_id}/comments", json={"body": "more"}), data)
            _refused(
                await admin.post(
                    "/api/repositories", json={"source": str(source), "slug": "example.com/a/b"}
                ),
                data,
            )
            # Reads go on.
            assert (await admin.get(f"/v1/posts/{post_id}")).status_code == 200
            assert (await admin.get("/v1/search", params={"q": "room"})).status_code == 200
            assert (await admin.get("/api/repositories")).status_code == 200

        # Room again: no restart, the same requests succeed.
        await _settle()
        again = await admin.post("/v1/posts", json={"title": "after", "body": "room again"})
        assert again.status_code == 201, again.text
        started = await admin.post(
            "/api/repositories", json={"source": str(source), "slug": "example.com/a/b"}
        )
        assert started.status_code == 202, started.text
        job_id = started.json()["job"]["id"]
        # The disk fills while the job runs: it pauses, saying why, and goes on once the
        # ballast is gone.
        phases: list[str] = []
        with _ballast(data, ballast):

            async def paused() -> bool:
                job = (await admin.get(f"/api/jobs/{job_id}")).json()
                phases.append(job["progress"]["phase"])
                assert job["state"] != "failed", job
                return job["progress"]["phase"].startswith("paused:")

            await wait_until(paused, 60.0, "the job to pause", every_s=0.1)
        assert "COGRAPH_DISK_MIN_FREE_MB" in phases[-1]
        finished = await wait_job(admin, job_id)
        assert finished["state"] == "succeeded", finished

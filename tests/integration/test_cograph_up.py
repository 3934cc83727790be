"""`cograph up` end to end: real processes, real PostgreSQL, a clean stop, no orphans."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from cograph.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from svckit.internal_auth import TokenSigner
from svckit.ports import EXIT_ENVIRONMENT, PortInUse, check_port_free
from tests.integration.support.embedders import MODEL_CACHE
from tests.internal_auth import signed_metadata


@contextlib.contextmanager
def _cograph_up(
    root: Path, port_base: int = 0, **extra_env: str
) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """`cograph up` with its data (the embedded PostgreSQL's included) in `root`/data: a
    directory from the `pg_home` fixture, never under tmp_path, whose base another pytest
    run re-tightens, locking the server's own user out (tests/integration/support/pg_home.py)."""
    env = {
        **os.environ,
        "COGRAPH_DATA_DIR": str(root / "data"),
        "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
        **extra_env,
    }
    env.pop("COGRAPH_DATABASE_URL", None)
    # `cograph up` makes its own internal secret in the data directory unless one is given.
    env.pop("COGRAPH_INTERNAL_SECRET_FILE", None)
    env.pop("COGRAPH_INTERNAL_SECRET", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "cograph_cli", "up", "--port-base", str(port_base)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    endpoints: dict[str, str] = {}
    assert process.stdout is not None
    deadline = time.monotonic() + 240
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        match = re.match(r"\s+(\w+)\s+(?:grpc|http)://(\S+)", line)
        if match:
            endpoints[match.group(1)] = match.group(2)
        key = re.match(r"admin API key .*: (cg_\S+)$", line)
        if key:
            endpoints["admin_key"] = key.group(1)
        pg = re.match(r"postgres\s+embedded, data in (\S+)", line)
        if pg:
            endpoints["postgres"] = pg.group(1)
        if line.startswith("data in") or time.monotonic() > deadline:
            break
    assert endpoints, "".join(lines)
    try:
        yield process, endpoints
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def up(pg_home: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    with _cograph_up(pg_home) as started:
        yield started


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_up_serves_and_stops_cleanly_on_sigterm(
    up: tuple[subprocess.Popen[str], dict[str, str]],
) -> None:
    process, endpoints = up
    assert "embedder" in endpoints
    # The first start made the internal secret, private, and handed it to every service:
    # they refuse a call without a token and answer one signed with it.
    secret_file = Path(endpoints["postgres"]).parent / "internal.secret"
    assert secret_file.stat().st_mode & 0o777 == 0o600
    assert len(secret_file.read_text().strip()) == 64
    signer = TokenSigner(secret_file.read_bytes().strip())
    with grpc.insecure_channel(endpoints["embedder"]) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Embed(embedder_pb2.EmbedRequest(texts=["who is asking?"]), timeout=10)
        assert isinstance(refused.value, grpc.Call)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        reply = stub.Embed(
            embedder_pb2.EmbedRequest(texts=["is it up?"]),
            metadata=signed_metadata("/cograph.embedder.v1.EmbedderService/Embed", signer=signer),
            timeout=10,
        )
    assert reply.dimension == 384

    children = _descendants(process.pid)
    services = {k: v for k, v in endpoints.items() if k not in ("postgres", "admin_key")}
    assert len(children) >= len(services)
    pgdata = endpoints["postgres"]
    postgres = [
        p for p in psutil.process_iter(["cmdline"]) if pgdata in " ".join(p.info["cmdline"] or [])
    ]
    assert postgres, "embedded postgres should be running"

    # The first start made an admin key, printed it once and kept it in a private file.
    key_file = Path(endpoints["postgres"]).parent / "admin.key"
    assert key_file.read_text().strip() == endpoints["admin_key"]
    assert key_file.stat().st_mode & 0o777 == 0o600
    listed = httpx.get(
        f"http://{endpoints['gateway']}/api/repositories",
        headers={"Authorization": f"Bearer {endpoints['admin_key']}"},
        timeout=10,
    )
    assert listed.status_code == 200
    _every_service_serves_its_metrics(Path(endpoints["postgres"]).parent / "run", endpoints)

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    _, gone_alive = psutil.wait_procs(children, timeout=10)
    assert not gone_alive, f"orphans left: {gone_alive}"
    _, still_running = psutil.wait_procs(postgres, timeout=10)
    assert not still_running, f"postgres left running: {still_running}"


def _scrape(address: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    reply = httpx.get(f"http://{address}/metrics", timeout=10)
    assert reply.status_code == 200, reply.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def _value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """The sum of `name` over the samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, got), v in samples.items() if n == name and wanted <= got)


def _every_service_serves_its_metrics(run: Path, endpoints: dict[str, str]) -> None:
    """After one search, one route and one note search through the gateway, each service's
    run/<service>.metrics names a reachable /metrics whose series moved."""
    auth = {"Authorization": f"Bearer {endpoints['admin_key']}"}
    gateway = f"http://{endpoints['gateway']}"
    searched = httpx.post(
        f"{gateway}/api/search", json={"query": "ParseConfig"}, headers=auth, timeout=30
    )
    assert searched.status_code == 200, searched.text
    routed = httpx.post(
        f"{gateway}/api/route", json={"query": "retry policy"}, headers=auth, timeout=30
    )
    assert routed.status_code == 200, routed.text
    notes = httpx.get(f"{gateway}/v1/search", params={"q": "signup"}, headers=auth, timeout=30)
    assert notes.status_code == 200, notes.text
    addresses = {
        name: (run / f"{name}.metrics").read_text().strip()
        for name in ("embedder", "retrieval", "router", "commons", "gateway")
    }
    assert all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in addresses.values()), addresses
    # The gateway's metrics are on a listener of their own, not its public port.
    assert addresses["gateway"] != endpoints["gateway"]
    assert httpx.get(f"{gateway}/metrics", headers=auth, timeout=10).status_code == 404
    handled = "cograph_grpc_server_handled_total"

    retrieval = _scrape(addresses["retrieval"])
    assert _value(retrieval, handled, grpc_method="Search", grpc_code="OK") >= 1
    assert _value(retrieval, "cograph_retrieval_search_seconds_count") >= 1
    assert _value(retrieval, "cograph_retrieval_search_streams_total", stream="lexical") >= 1
    assert _value(retrieval, "cograph_db_pool_acquire_seconds_count", pool="requests") >= 1
    assert ("cograph_retrieval_index_jobs_running", frozenset()) in retrieval

    embedder = _scrape(addresses["embedder"])
    # The unsigned call above is counted with the code its caller saw.
    assert _value(embedder, handled, grpc_method="Embed", grpc_code="UNAUTHENTICATED") == 1
    assert _value(embedder, handled, grpc_method="Embed", grpc_code="OK") >= 2
    assert _value(embedder, "cograph_embedder_batch_texts_count", lane="query") >= 2
    assert _value(embedder, "cograph_embedder_busy_seconds_total", lane="query") > 0
    assert ("cograph_embedder_queue_texts", frozenset({("lane", "bulk")})) in embedder

    router = _scrape(addresses["router"])
    assert _value(router, handled, grpc_method="Route", grpc_code="OK") >= 1
    assert _value(router, "cograph_router_cache_lookups_total") >= 1

    commons = _scrape(addresses["commons"])
    assert _value(commons, handled, grpc_method="SearchPosts", grpc_code="OK") >= 1
    assert _value(commons, "cograph_commons_embedding_backlog") == 0

    gateway_series = _scrape(addresses["gateway"])
    assert _value(gateway_series, "cograph_gateway_requests_total", route="/api/search") >= 1


class _Output:
    """Keeps reading `cograph up`'s output in a thread, so the tests can wait for a line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r} in:\n{''.join(self.lines)}")


def _service_pids(process: subprocess.Popen[str]) -> dict[str, int]:
    """The pid of each service process under `cograph up`, by service name."""
    pids: dict[str, int] = {}
    for child in _descendants(process.pid):
        try:
            cmdline = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if len(cmdline) >= 3 and cmdline[-2] == "-m":
            pids[cmdline[-1]] = child.pid
    return pids


def _postmaster_pid(endpoints: dict[str, str]) -> int:
    return int((Path(endpoints["postgres"]) / "postmaster.pid").read_text().split()[0])


class _Load:
    """Requests through the gateway, one after another in a thread, while faults happen."""

    def __init__(self, url: str, key: str) -> None:
        self.results: list[tuple[int, float]] = []  # (status or 0 on a transport error, s)
        self._stop = threading.Event()
        self._client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                status = self._client.get("/api/repositories").status_code
            except httpx.HTTPError:
                status = 0
            self.results.append((status, time.monotonic() - start))
            time.sleep(0.05)

    def close(self) -> list[tuple[int, float]]:
        self._stop.set()
        self._thread.join(timeout=40)
        self._client.close()
        return self.results


def _wait_restarted(
    process: subprocess.Popen[str], name: str, old_pid: int, timeout_s: float
) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = _service_pids(process).get(name)
        if pid is not None and pid != old_pid:
            return pid
        time.sleep(0.1)
    raise AssertionError(f"{name} was not restarted within {timeout_s} s")


def _wait_ok(check: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until check() holds; fails after timeout_s."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        with contextlib.suppress(Exception):
            if check():
                return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def test_killed_services_and_postgres_are_restarted_and_nothing_else_moves(
    up: tuple[subprocess.Popen[str], dict[str, str]],
) -> None:
    process, endpoints = up
    output = _Output(process)
    gateway, key = f"http://{endpoints['gateway']}", endpoints["admin_key"]
    before = _service_pids(process)
    assert set(before) >= {"embedder", "retrieval", "gateway"}, before
    postgres = _postmaster_pid(endpoints)
    load = _Load(gateway, key)

    def listed() -> bool:
        reply = httpx.get(
            f"{gateway}/api/repositories", headers={"Authorization": f"Bearer {key}"}, timeout=5
        )
        return reply.status_code == 200

    # retrieval, killed outright while requests flow through the gateway to it.
    os.kill(before["retrieval"], signal.SIGKILL)
    output.wait_for(r"retrieval exited \(signal 9\); restarting in 0\.5 s, restart 1", 10)
    retrieval = _wait_restarted(process, "retrieval", before["retrieval"], 20)
    output.wait_for(r"retrieval is serving again", 30)
    assert _wait_ok(listed, 10, "the gateway to list through the new retrieval") < 10

    # The embedder, likewise: it answers again from a new process on the same address.
    os.kill(before["embedder"], signal.SIGKILL)
    output.wait_for(r"embedder exited \(signal 9\); restarting in 0\.5 s, restart 1", 10)
    _wait_restarted(process, "embedder", before["embedder"], 20)

    def embedder_serving() -> bool:
        # Health needs no internal token; SERVING means the model is loaded and answering.
        with grpc.insecure_channel(endpoints["embedder"]) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    _wait_ok(embedder_serving, 60, "the restarted embedder to serve")
    ready = httpx.get(f"{gateway}/readyz", timeout=10).json()
    assert ready["status"] == "ready" and ready["dependencies"]["embedder"] == "serving", ready

    # Nobody else was restarted, PostgreSQL included.
    after = _service_pids(process)
    assert after["retrieval"] == retrieval
    for name in set(before) - {"retrieval", "embedder"}:
        assert after[name] == before[name], name
    assert _postmaster_pid(endpoints) == postgres

    # The embedded PostgreSQL, killed: restarted on the same socket, and the services
    # reconnect by themselves (the gateway's key lookup, retrieval's listing).
    os.kill(postgres, signal.SIGKILL)
    output.wait_for(r"postgres exited \(pid \d+\); restarting in", 10)
    output.wait_for(r"postgres is serving again", 40)
    assert _postmaster_pid(endpoints) != postgres
    _wait_ok(listed, 20, "requests to succeed after PostgreSQL came back")
    auth = {"Authorization": f"Bearer {key}"}

    def every_service_answers() -> bool:
        note = httpx.post(
            f"{gateway}/v1/posts", json={"title": "t", "body": "after"}, headers=auth, timeout=5
        )
        routed = httpx.post(
            f"{gateway}/api/route", json={"query": "retry policy"}, headers=auth, timeout=5
        )
        return note.status_code == 201 and routed.status_code == 200

    _wait_ok(every_service_answers, 20, "the commons and the router to answer again")
    assert _service_pids(process) == after

    results = load.close()
    assert process.poll() is None
    assert any(status == 200 for status, _ in results)
    slowest = max(seconds for _, seconds in results)
    assert slowest < 15, f"a request waited {slowest:.1f} s"
    log = (Path(endpoints["postgres"]).parent / "run" / "up.log").read_text()
    assert "retrieval exited (signal 9); restarting in 0.5 s, restart 1" in log

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    assert not [p for p in _descendants(process.pid) if p.is_running()]


def test_repeated_fast_crashes_give_up_on_that_service_only(pg_home: Path) -> None:
    with _cograph_up(
        pg_home, COGRAPH_UP_GIVE_UP_CRASHES="3", COGRAPH_UP_RESTART_BACKOFF_S="0.2"
    ) as (process, endpoints):
        output = _Output(process)
        children = _descendants(process.pid)
        gateway, key = f"http://{endpoints['gateway']}", endpoints["admin_key"]
        killed: set[int] = set()
        deadline = time.monotonic() + 45
        # Killed as soon as each new router process appears: three fast crashes.
        while not any("giving up" in line for line in output.lines):
            assert time.monotonic() < deadline, "".join(output.lines)
            pid = _service_pids(process).get("router")
            if pid is not None and pid not in killed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.05)
        line = output.wait_for(r"router exited \(signal 9\); giving up after 3 crashes", 1)
        assert "everything else keeps running" in line
        time.sleep(1.0)  # no restart follows
        assert "router" not in _service_pids(process)

        # The rest serves on; readiness says what is missing.
        listed = httpx.get(
            f"{gateway}/api/repositories", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        assert listed.status_code == 200, listed.text
        ready = httpx.get(f"{gateway}/readyz", timeout=10)
        assert ready.status_code == 503
        assert ready.json()["status"] == "not_ready"
        assert ready.json()["dependencies"]["router"] != "serving"
        assert ready.json()["dependencies"]["retrieval"] == "serving"
        assert process.poll() is None

        # A gateway restarted while the router stays down comes back all the same: its own
        # start is what is waited for, not its backends.
        gateway_pid = _service_pids(process)["gateway"]
        os.kill(gateway_pid, signal.SIGKILL)
        output.wait_for(r"gateway is serving again", 30)
        relisted = httpx.get(
            f"{gateway}/api/repositories", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        assert relisted.status_code == 200, relisted.text
        children = _descendants(process.pid) + children

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 1  # a service was lost during the run
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"orphans left: {alive}"


def test_sigterm_during_a_restart_backoff_stops_everything(pg_home: Path) -> None:
    with _cograph_up(pg_home, COGRAPH_UP_RESTART_BACKOFF_S="20") as (process, endpoints):
        output = _Output(process)
        children = _descendants(process.pid)
        postgres = psutil.Process(_postmaster_pid(endpoints))
        os.kill(_service_pids(process)["router"], signal.SIGKILL)
        output.wait_for(r"router exited \(signal 9\); restarting in 20\.0 s, restart 1", 10)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - started < 20, "the stop waited for the backoff"
        _, alive = psutil.wait_procs([*children, postgres], timeout=10)
        assert not alive, f"left running: {alive}"
        assert not _descendants(process.pid)
        assert not any("router is serving again" in line for line in output.lines)


def test_giving_up_on_postgres_stops_everything(pg_home: Path) -> None:
    with _cograph_up(
        pg_home, COGRAPH_UP_GIVE_UP_CRASHES="2", COGRAPH_UP_RESTART_BACKOFF_S="0.2"
    ) as (process, endpoints):
        output = _Output(process)
        children = _descendants(process.pid)
        os.kill(_postmaster_pid(endpoints), signal.SIGKILL)
        output.wait_for(r"postgres is serving again", 40)
        restarted = psutil.Process(_postmaster_pid(endpoints))
        restarted.kill()
        output.wait_for(r"postgres exited \(pid \d+\); giving up after 2 crashes", 10)
        assert process.wait(timeout=60) == 1
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"left running: {alive}"
        assert not restarted.is_running() or restarted.status() == psutil.STATUS_ZOMBIE


def test_postgres_on_a_full_disk_waits_for_room_and_is_not_given_up(pg_home: Path) -> None:
    """A full disk is no crash: the watch waits for room instead of restarting the server
    into the same failure until it gives up, and restarts it once there is room. The disk
    is this machine's, its floor set a margin below what is free and a ballast file taking
    twice the margin (as in test_disk_full.py)."""
    data = pg_home / "data"
    data.mkdir()
    free_mb = shutil.disk_usage(data).free // 2**20
    margin_mb = min(1024, free_mb // 4)
    assert margin_mb >= 100, f"the test needs at least 400 MB free, not {free_mb} MB"
    with _cograph_up(
        pg_home,
        COGRAPH_DISK_MIN_FREE_MB=str(free_mb - margin_mb),
        COGRAPH_DISK_CHECK_S="0.2",
        COGRAPH_UP_GIVE_UP_CRASHES="2",
        COGRAPH_UP_RESTART_BACKOFF_S="0.2",
    ) as (process, endpoints):
        output = _Output(process)
        ballast = data / "ballast"
        fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, 2 * margin_mb * 2**20)
        finally:
            os.close(fd)
        try:
            postgres = _postmaster_pid(endpoints)
            os.kill(postgres, signal.SIGKILL)
            output.wait_for(r"postgres exited .*a restart cannot fix that, so it waits", 20)
            time.sleep(3)  # longer than the backoffs and the give-up policy need
            assert process.poll() is None
            waited = "".join(output.lines)
            assert "restarting in" not in waited and "giving up" not in waited, waited
        finally:
            ballast.unlink()
        output.wait_for(r"the disk has room again; restarting postgres", 20)
        output.wait_for(r"postgres is serving again", 40)
        assert _postmaster_pid(endpoints) != postgres and process.poll() is None
        # Stopped as an operator would, so the restarted server goes with it.
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def _free_port_block(count: int) -> int:
    """The first of `count` consecutive ports nothing listens on (checked, then released)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base: int = probe.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                check_port_free("127.0.0.1", port)
        except PortInUse:
            continue
        return base
    raise AssertionError("no block of free ports found")


def test_second_stack_on_ports_in_use_exits_naming_the_port(pg_home: Path) -> None:
    base = _free_port_block(5)
    with _cograph_up(pg_home / "first", port_base=base) as (process, endpoints):
        assert endpoints["embedder"] == f"127.0.0.1:{base}"
        embedder_pid = _service_pids(process)["embedder"]
        env = {
            **os.environ,
            "COGRAPH_DATA_DIR": str(pg_home / "second"),
            "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
        }
        for name in (
            "COGRAPH_DATABASE_URL",
            "COGRAPH_INTERNAL_SECRET_FILE",
            "COGRAPH_INTERNAL_SECRET",
        ):
            env.pop(name, None)
        second = subprocess.run(
            [sys.executable, "-m", "cograph_cli", "up", "--port-base", str(base)],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1, second.stdout + second.stderr
        error = second.stderr.strip()
        # One line: the service, the port, and who holds it (the first stack's embedder).
        assert len(error.splitlines()) == 1, error
        assert f"port {base} on 127.0.0.1 is already in use" in error, error
        assert f"pid {embedder_pid} (" in error and "-m embedder" in error, error
        assert "cograph is up" not in second.stdout
        # Refused before anything started: no PostgreSQL, no service of the second stack.
        assert not (pg_home / "second" / "pg").exists()
        leftovers = [
            p
            for p in psutil.process_iter(["cmdline"])
            if str(pg_home / "second") in " ".join(p.info["cmdline"] or [])
        ]
        assert not leftovers, leftovers

        # The first stack is untouched: its searches still answer, with its own key.
        reply = httpx.post(
            f"http://{endpoints['gateway']}/api/search",
            json={"query": "retry policy"},
            headers={"Authorization": f"Bearer {endpoints['admin_key']}"},
            timeout=30,
        )
        assert reply.status_code == 200, reply.text
        assert _service_pids(process)["embedder"] == embedder_pid
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0


def test_a_service_whose_port_is_taken_exits_3_in_one_line(tmp_path: Path) -> None:
    """Past the check `cograph up` makes first (a port taken in between, or a service run
    on its own): the service itself refuses, in one line naming the port and its holder."""
    secret = tmp_path / "secret"
    secret.write_text("s" * 40)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {
            **os.environ,
            "COGRAPH_INTERNAL_SECRET_FILE": str(secret),
            "COGRAPH_DATA_DIR": str(tmp_path / "data"),
            "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
            "EMBEDDER_LISTEN": f"127.0.0.1:{port}",
        }
        env.pop("COGRAPH_INTERNAL_SECRET", None)
        ran = subprocess.run(
            [sys.executable, "-m", "embedder"],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert ran.returncode == EXIT_ENVIRONMENT, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(f"embedder: cannot listen: port {port} on 127.0.0.1 ")
    assert f"pid {os.getpid()} (" in lines[0], lines[0]

"""What the operator must fix stops a start in one line, without a traceback: a wrong
COGRAPH_DATABASE_URL (bad scheme, unreachable, refused credentials), a missing or invalid
EMBEDDER_MODEL_PATH, a data directory that cannot be written. Real processes, as an
operator would start them: `cograph up` and `python -m <service>`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil

from tests.integration.support.embedders import MODEL_CACHE
from tests.integration.support.faults import free_port

SECRET = "s" * 40


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "COGRAPH_DATA_DIR": str(tmp_path / "data"),
        "EMBEDDER_CACHE_DIR": str(MODEL_CACHE),
        "COGRAPH_INTERNAL_SECRET": SECRET,
        **extra,
    }
    env.pop("COGRAPH_INTERNAL_SECRET_FILE", None)
    if "COGRAPH_DATABASE_URL" not in extra:
        env.pop("COGRAPH_DATABASE_URL", None)
    return env


def _run(args: list[str], env: dict[str, str], timeout_s: float = 120) -> tuple[int, str, str]:
    ran = subprocess.run(
        [sys.executable, *args],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    return ran.returncode, ran.stdout, ran.stderr


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    assert "Traceback" not in stderr
    return lines[0]


def _with_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:wrong@{host}"))


def test_up_with_a_database_url_of_another_scheme(tmp_path: Path) -> None:
    url = "mysql://cograph:secret@db.example/cograph"
    code, out, err = _run(
        ["-m", "cograph_cli", "up", "--port-base", "0"],
        _env(tmp_path, COGRAPH_DATABASE_URL=url),
    )
    assert code == 2, out + err
    line = _one_line(err)
    assert line.startswith("error: COGRAPH_DATABASE_URL (mysql://cograph:***@db.example/")
    assert "is not a usable PostgreSQL URL" in line and "scheme" in line
    assert "secret" not in err  # the password is never printed
    assert "cograph is up" not in out


def test_up_with_an_unreachable_database(tmp_path: Path) -> None:
    url = f"postgresql://cograph@127.0.0.1:{free_port()}/cograph"
    started = time.monotonic()
    code, out, err = _run(
        ["-m", "cograph_cli", "up", "--port-base", "0"],
        _env(tmp_path, COGRAPH_DATABASE_URL=url, COGRAPH_DB_CONNECT_TIMEOUT_S="2"),
    )
    assert code == 1, out + err
    line = _one_line(err)
    assert "the database cannot be reached" in line, line
    assert time.monotonic() - started < 60
    assert "cograph is up" not in out


def test_up_with_credentials_the_server_refuses(tmp_path: Path, pg_server_url: str) -> None:
    url = _with_user(pg_server_url, "nobody_here")
    code, out, err = _run(
        ["-m", "cograph_cli", "up", "--port-base", "0"],
        _env(tmp_path, COGRAPH_DATABASE_URL=url),
    )
    assert code == 2, out + err
    line = _one_line(err)
    assert "the server refused the connection" in line and "nobody_here" in line, line
    assert "wrong" not in line


def test_a_service_with_a_wrong_database_url_says_so_in_one_line(tmp_path: Path) -> None:
    code, _, err = _run(
        ["-m", "commons"], _env(tmp_path, COGRAPH_DATABASE_URL="postgres//no-scheme")
    )
    assert code == 2, err  # a restart cannot fix it: the supervisor does not retry
    assert _one_line(err).startswith("commons: COGRAPH_DATABASE_URL (postgres//no-scheme)")
    url = f"postgresql://cograph@127.0.0.1:{free_port()}/cograph"
    code, _, err = _run(["-m", "gateway"], _env(tmp_path, COGRAPH_DATABASE_URL=url))
    assert code == 1, err  # the server may come back: a supervisor retries this one
    assert "gateway: COGRAPH_DATABASE_URL" in _one_line(err)


def test_a_data_directory_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, out, err = _run(
        ["-m", "cograph_cli", "up", "--port-base", "0"],
        _env(tmp_path, COGRAPH_DATA_DIR=str(blocker / "data")),
    )
    assert code == 2, out + err
    line = _one_line(err)
    assert line.startswith(
        f"error: configuration: COGRAPH_DATA_DIR: {blocker / 'data'} is not a writable"
    )


def test_embedder_model_path_is_checked_at_start(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    code, _, err = _run(["-m", "embedder"], _env(tmp_path, EMBEDDER_MODEL_PATH=str(missing)))
    assert code == 2, err
    assert _one_line(err) == (
        f"embedder: configuration error: EMBEDDER_MODEL_PATH: {missing} does not exist "
        "(a local model directory)"
    )
    half = tmp_path / "half-a-model"
    half.mkdir()
    (half / "config.json").write_text("{}")
    code, _, err = _run(["-m", "embedder"], _env(tmp_path, EMBEDDER_MODEL_PATH=str(half)))
    assert code == 2, err
    line = _one_line(err)
    assert "is not a saved model: it lacks tokenizer.json, model.safetensors or " in line


def test_up_stops_at_a_service_that_cannot_start_and_leaves_nothing_running(
    tmp_path: Path, pg_home: Path
) -> None:
    """The embedder exits 2 (its model path is wrong): not restarted, `cograph up` says why
    in one line and stops before "cograph is up", PostgreSQL included. The data directory
    (PostgreSQL's) lives in `pg_home`, out of reach of another pytest run (conftest)."""
    missing = tmp_path / "no-such-model"
    env = _env(tmp_path, EMBEDDER_MODEL_PATH=str(missing), COGRAPH_DATA_DIR=str(pg_home / "data"))
    env.pop("COGRAPH_INTERNAL_SECRET")
    process = subprocess.Popen(
        [sys.executable, "-m", "cograph_cli", "up", "--port-base", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        try:
            seen.extend(psutil.Process(process.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert "cograph is up" not in out
    assert _one_line(err) == (
        f"error: embedder: configuration error: EMBEDDER_MODEL_PATH: {missing} does not "
        "exist (a local model directory)"
    )
    assert "not restarting" in out and "restarting in" not in out, out
    _, alive = psutil.wait_procs(seen, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive


def test_embedder_cache_directory_must_be_writable_until_the_model_is_exported(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cache = blocker / "models"
    code, _, err = _run(
        ["-m", "embedder"],
        _env(tmp_path, EMBEDDER_CACHE_DIR=str(cache), EMBEDDER_LISTEN="127.0.0.1:0"),
    )
    assert code == 2, err
    assert _one_line(err).startswith(
        f"embedder: configuration error: EMBEDDER_CACHE_DIR: {cache} is not a writable"
    )

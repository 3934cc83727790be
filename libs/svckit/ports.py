"""Listening ports are exclusive: a port in use is an error that names the port and, where
it can be found, the process that holds it.

gRPC binds with SO_REUSEPORT unless told otherwise, and two servers on one port then share
its connections: a second stack started by mistake would silently take half the first
one's calls (with another internal secret, so they fail). Every listener here binds
exclusively, and a refused bind becomes `PortInUse`, which the service runner reports in
one line and exits with EXIT_ENVIRONMENT, a code the supervisor does not restart on.
"""

from __future__ import annotations

import errno
import socket

import psutil

# A service's exit code for a condition of its environment that a restart cannot fix (a
# port held by another process). ConfigError exits 2; a crash anything else.
EXIT_CONFIG = 2
EXIT_ENVIRONMENT = 3


class PortInUse(OSError):
    """host:port is already bound by another listener."""

    def __init__(self, host: str, port: int, holder: str | None = None) -> None:
        self.host = host
        self.port = port
        self.holder = holder
        by = f" by {holder}" if holder else ""
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is already in use{by}")

    def __str__(self) -> str:
        return str(self.strerror)


def port_holder(port: int) -> str | None:
    """'pid N (command line)' of a process listening on TCP `port`, or None when none is
    found (nobody listens, or the holder belongs to a user whose sockets we cannot see)."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid is None:
            return "a process of another user"
        try:
            command = " ".join(psutil.Process(conn.pid).cmdline()) or "?"
        except psutil.Error:
            command = "?"
        if len(command) > 160:
            command = command[:157] + "..."
        return f"pid {conn.pid} ({command})"
    return None


def bind_exclusive(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (not listening yet), or PortInUse.

    SO_REUSEADDR is set, as servers set it, so that connections of a previous run still in
    TIME_WAIT do not count as "in use"; SO_REUSEPORT is not, so a live listener does.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PortInUse(host, port, port_holder(port)) from None
        raise
    return sock


def check_port_free(host: str, port: int) -> None:
    """Raises PortInUse when host:port cannot be bound now (0 is always free)."""
    if port != 0:
        bind_exclusive(host, port).close()


def split_host_port(address: str) -> tuple[str, int]:
    """'host:port' (or '[v6]:port') -> (host, port); a missing or bad port is 0."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        return host, int(port)
    except ValueError:
        return host, 0

"""A private git server over https on 127.0.0.1: `git http-backend` (git's own smart-HTTP
CGI program) behind a small http.server that demands Basic auth, with a throwaway
self-signed certificate that git is told to trust through GIT_SSL_CAINFO."""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

_CGI_TIMEOUT_S = 60


@dataclass
class GitHttpServer:
    port: int
    ca_file: Path
    username: str
    token: str
    # (method, path, whether the request carried the right credential)
    requests: list[tuple[str, str, bool]] = field(default_factory=list)
    # Every Authorization header value received, to check what git sent.
    authorizations: list[str] = field(default_factory=list)

    def url(self, repository: str, user: str = "") -> str:
        return f"https://{user + '@' if user else ''}127.0.0.1:{self.port}/{repository}"


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


def _dechunk(read_line: Callable[[], bytes], read: Callable[[int], bytes]) -> bytes:
    """A chunked request body (git sends large POSTs so)."""
    body = bytearray()
    while True:
        size = int(read_line().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            read_line()
            return bytes(body)
        body += read(size)
        read_line()


def _handler(server: GitHttpServer, project_root: Path) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{server.username}:{server.token}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _serve(self) -> None:
            given = self.headers.get("Authorization", "")
            if given:
                server.authorizations.append(given)
            allowed = given == expected
            server.requests.append((self.command, self.path, allowed))
            if not allowed:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="private"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = _dechunk(self.rfile.readline, self.rfile.read)
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": parts.path,
                "QUERY_STRING": parts.query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": server.username,
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            }
            done = subprocess.run(
                ["git", "http-backend"],
                input=body,
                env=env,
                capture_output=True,
                timeout=_CGI_TIMEOUT_S,
                check=False,
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            if not payload and b"\n\n" in done.stdout:
                head, _, payload = done.stdout.partition(b"\n\n")
            status = 200
            headers: list[tuple[str, str]] = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

    return Handler


@contextlib.contextmanager
def git_https_server(
    project_root: Path, directory: Path, username: str, token: str
) -> Iterator[GitHttpServer]:
    """Serves every repository under `project_root` to requests with the Basic credential
    `username`:`token` only (401 otherwise)."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = _certificate(directory)
    server = GitHttpServer(0, cert, username, token)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server, project_root))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    server.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)

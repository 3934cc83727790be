"""The internal secret on a machine that runs `cograph up`: created once in the data
directory, and read by the operator commands that call the services directly.

Services refuse any call that is not signed with it (svckit.internal_auth), so `cograph up`
hands its path to every child, and `index`, `search`, `route` and `notes` sign with it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

import grpc

from svckit.clients import dial
from svckit.config import INTERNAL_SECRET_FILE_NAME, Env, operator_internal_secret
from svckit.internal_auth import TokenSigner

_SECRET_BYTES = 32
_PRIVATE = 0o600


def ensure_secret_file(root: Path) -> Path:
    """`root/internal.secret`: reused when present, else 32 random bytes (hex), mode 0600.

    Created under a temporary name and linked into place, so nobody ever reads a partly
    written file, and a concurrent `cograph up` that got there first wins (link refuses to
    replace): both then use the same secret.
    """
    path = root / INTERNAL_SECRET_FILE_NAME
    if path.exists():
        if path.stat().st_mode & 0o077:
            path.chmod(_PRIVATE)  # whoever else could read it could act as admin
        return path
    descriptor, tmp_name = tempfile.mkstemp(dir=root, prefix=".internal.secret.")
    try:
        # mkstemp creates the file 0600 already; chmod keeps that true whatever the umask.
        os.fchmod(descriptor, _PRIVATE)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_hex(_SECRET_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp_name, path)
    finally:
        os.unlink(tmp_name)
    return path


def operator_channel(address: str, environ: Env | None = None) -> grpc.aio.Channel:
    """A channel to a service whose calls are signed with this machine's internal secret
    (COGRAPH_INTERNAL_SECRET_FILE or COGRAPH_INTERNAL_SECRET, else the data directory's
    file); the caller's explicit principal metadata is what gets signed.

    Raises svckit.config.ConfigError, naming the variable, when there is no usable secret.
    """
    secret = operator_internal_secret(environ or Env())
    return dial(address, signer=TokenSigner(secret), default_timeout_s=60.0)

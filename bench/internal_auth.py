"""The internal secret a benchmark's services share and its clients sign with.

Read the way the operator CLI reads it (COGRAPH_INTERNAL_SECRET_FILE or
COGRAPH_INTERNAL_SECRET, else the `internal.secret` that `cograph up` keeps in
COGRAPH_DATA_DIR), so a benchmark can call services `cograph up` runs; where there is
none (a fresh clone), the benchmark makes its own for the process: the services it
starts get it through with_secret and its clients sign with it.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from svckit.clients import dial
from svckit.config import (
    INTERNAL_SECRET_FILE_NAME,
    INTERNAL_SECRET_FILE_VAR,
    INTERNAL_SECRET_VAR,
    Env,
    data_dir,
    operator_internal_secret,
)
from svckit.internal_auth import TokenSigner


@functools.cache  # one secret per process: services and clients must agree on it
def secret() -> bytes:
    env = Env()
    configured = env.optional_str(INTERNAL_SECRET_FILE_VAR) or env.optional_str(INTERNAL_SECRET_VAR)
    if configured or (data_dir(env) / INTERNAL_SECRET_FILE_NAME).exists():
        return operator_internal_secret(env)  # a bad one is still an error, not replaced
    return secrets.token_hex(32).encode()


def with_secret(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` for a service the benchmark starts, holding the benchmark's secret."""
    merged = {k: v for k, v in environ.items() if k != INTERNAL_SECRET_FILE_VAR}
    merged[INTERNAL_SECRET_VAR] = secret().decode()
    return merged


def signed_channel(
    target: str, default_timeout_s: float = 600.0, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A channel whose calls are signed; benchmark calls set their own deadlines."""
    return dial(
        target,
        signer=TokenSigner(secret()),
        default_timeout_s=default_timeout_s,
        options=options,
    )

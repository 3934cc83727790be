"""The internal secret a benchmark's services share and its clients sign with.

Read the way the operator CLI reads it (COGRAPH_INTERNAL_SECRET_FILE or
COGRAPH_INTERNAL_SECRET, else the `internal.secret` that `cograph up` keeps in
COGRAPH_DATA_DIR), so a benchmark runs wherever `cograph up` has run once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from svckit.clients import dial
from svckit.config import (
    INTERNAL_SECRET_FILE_VAR,
    INTERNAL_SECRET_VAR,
    Env,
    operator_internal_secret,
)
from svckit.internal_auth import TokenSigner


def secret() -> bytes:
    return operator_internal_secret(Env())


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

"""How the operator commands report a failure: one style for every command.

`error: <code>: <detail>` on stderr, or `{"error", "detail"}` on stdout with `--json`; the
code is the service's machine reason (svckit.errors.reason_of) when it sent one, else the
gRPC status in lower case.
"""

from __future__ import annotations

import json
import sys

import grpc

from svckit.errors import reason_of


def print_error(as_json: bool, code: str, detail: str | None) -> None:
    if as_json:
        print(json.dumps({"error": code, "detail": detail}))
    else:
        print(f"error: {code}: {detail}", file=sys.stderr)


def report_rpc_error(
    err: grpc.aio.AioRpcError, *, as_json: bool, service: str, address: str
) -> int:
    """Prints a failed call to `service` at `address`; the exit status: 2 for a request
    the service refused as malformed, 1 otherwise."""
    reason = reason_of(err)
    code = reason or err.code().name.lower()
    detail = err.details() or code
    if err.code() == grpc.StatusCode.UNAVAILABLE and not reason:
        detail = f"{service} service not reachable at {address}"
    print_error(as_json, code, detail)
    return 2 if err.code() == grpc.StatusCode.INVALID_ARGUMENT else 1

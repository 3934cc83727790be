"""Who the operator commands act as, and where they find the services.

`index`, `collection`, `search`, `route` and `notes` talk to the services on this machine
directly, signing with the internal secret (cograph_cli.internal_secret). They all act as one
identity: the local operator, an admin, with the principal `admin` of the admin key that
`cograph up` creates (cograph_api.admin_keys), so a command that goes through the gateway
with `.cograph/admin.key` (`keys`, `access`, `mcp`) acts for the same principal.
COGRAPH_PRINCIPAL (or a command's `--as`) names another. What `cograph index` creates is
what `cograph route` and `cograph search` find, and notes are authored by that principal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from svckit.config import Env, data_dir
from svckit.requestctx import ADMIN_HEADER, PRINCIPAL_HEADER

OPERATOR_PRINCIPAL = "admin"  # the admin key's principal (cograph_api.admin_keys)
PRINCIPAL_VAR = "COGRAPH_PRINCIPAL"

# The services the operator commands call, and where `cograph up` puts them by default.
DEFAULT_ADDRS: dict[str, str] = {
    "retrieval": "127.0.0.1:50052",
    "router": "127.0.0.1:50053",
    "commons": "127.0.0.1:50054",
}

Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class OperatorIdentity:
    """The principal an operator command acts for; always with the admin flag."""

    principal: str

    @classmethod
    def from_env(cls, env: Env | None = None, as_principal: str | None = None) -> OperatorIdentity:
        """`as_principal` (a command's `--as`) first, then COGRAPH_PRINCIPAL, then `admin`."""
        if as_principal and as_principal.strip():
            return cls(as_principal.strip())
        return cls((env or Env()).str(PRINCIPAL_VAR, OPERATOR_PRINCIPAL).strip())

    def metadata(self) -> Metadata:
        """The principal metadata the services read; the channel signs it."""
        return ((PRINCIPAL_HEADER, self.principal), (ADMIN_HEADER, "1"))


def service_address(service: str, env: Env | None = None) -> str:
    """`<SERVICE>_ADDR`; else the port of the stack `cograph up` runs from COGRAPH_DATA_DIR
    (each service writes the port it bound to `run/<service>.port`, whatever --port-base
    chose), on this machine; else the address `cograph up` gives that service by default."""
    env = env or Env()
    given = env.optional_str(f"{service.upper()}_ADDR")
    if given:
        return given
    port = _running_port(data_dir(env) / "run" / f"{service}.port")
    return f"127.0.0.1:{port}" if port is not None else DEFAULT_ADDRS[service]


def _running_port(port_file: Path) -> int | None:
    try:
        text = port_file.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit() or not 0 < int(text) < 65536:
        return None  # not what a service writes: the default address, never a guess
    return int(text)

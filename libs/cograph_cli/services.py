"""The services `cograph up` knows how to run, and where they listen by default."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServiceSpec:
    name: str  # also the Python package and the env prefix (upper-cased)
    port: int  # default port
    kind: str = "grpc"  # "grpc" or "http"
    health_name: str = ""  # gRPC health service name checked for readiness

    @property
    def env_prefix(self) -> str:
        return self.name.upper()

    def available(self) -> bool:
        """Whether this checkout has the service (services arrive one issue at a time)."""
        try:
            return importlib.util.find_spec(f"{self.name}.__main__") is not None
        except ModuleNotFoundError:
            return False

    def migrations_dir(self) -> Path | None:
        spec = importlib.util.find_spec(self.name)
        if spec is None or spec.origin is None:
            return None
        folder = Path(spec.origin).parent / "migrations"
        return folder if any(folder.glob("*.sql")) else None


# Start order matters only for readability of the output: every service tolerates peers that
# are not up yet (clients retry or report UNAVAILABLE), so they start together.
SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("embedder", 50051, health_name="cograph.embedder.v1.EmbedderService"),
    ServiceSpec("retrieval", 50052, health_name="cograph.retrieval.v1.RetrievalService"),
    ServiceSpec("router", 50053, health_name="cograph.router.v1.RouterService"),
    ServiceSpec("commons", 50054, health_name="cograph.commons.v1.CommonsService"),
    ServiceSpec("gateway", 8080, kind="http"),
)


def gateway_migrations() -> Path:
    """The gateway's migrations (its key table), found without importing the gateway."""
    folder = next(spec for spec in SERVICES if spec.name == "gateway").migrations_dir()
    if folder is None:
        raise RuntimeError("the gateway's migrations are not installed")
    return folder

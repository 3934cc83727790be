"""Typed, prefixed, fail-fast configuration read from the environment.

Each service declares a frozen dataclass of settings and builds it with an `Env` at start-up,
so a typo'd or out-of-range value stops the process with a message naming the variable
instead of surfacing as a confusing failure later.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# The Env methods are named after the types they return (str, int, ...), which shadows the
# builtins inside the class body; annotations use these aliases instead.
_Str = str
_Int = int
_Float = float
_Bool = bool


class ConfigError(ValueError):
    """A configuration value is missing or malformed."""


class Env:
    """Reads typed values from an environment mapping, optionally under a prefix."""

    def __init__(self, environ: Mapping[_Str, _Str] | None = None, prefix: _Str = "") -> None:
        self._environ = os.environ if environ is None else environ
        self._prefix = prefix

    def with_prefix(self, prefix: _Str) -> Env:
        """An Env reading the same mapping under another prefix."""
        return Env(self._environ, prefix)

    def _raw(self, name: _Str) -> _Str | None:
        return self._environ.get(self._prefix + name)

    def _fail(self, name: _Str, why: str) -> ConfigError:
        return ConfigError(f"{self._prefix}{name}: {why}")

    def str(self, name: _Str, default: _Str | None = None) -> _Str:
        value = self._raw(name)
        if value is None or value == "":
            if default is None:
                raise self._fail(name, "is required but not set")
            return default
        return value

    def optional_str(self, name: _Str) -> _Str | None:
        value = self._raw(name)
        return value if value else None

    def int(
        self, name: _Str, default: _Int, *, min: _Int | None = None, max: _Int | None = None
    ) -> _Int:
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
        name: _Str,
        default: _Float,
        *,
        min: _Float | None = None,
        max: _Float | None = None,
    ) -> _Float:
        value = self._raw(name)
        if value is None or value.strip() == "":
            result = default
        else:
            try:
                result = float(value.strip())
            except ValueError:
                raise self._fail(name, f"must be a number, got {value!r}") from None
        if math.isnan(result):  # NaN passes every comparison below; reject it explicitly.
            raise self._fail(name, "must be a number, got NaN")
        if min is not None and result < min:
            raise self._fail(name, f"must be >= {min}, got {result}")
        if max is not None and result > max:
            raise self._fail(name, f"must be <= {max}, got {result}")
        return result

    def bool(self, name: _Str, default: _Bool) -> _Bool:
        value = self._raw(name)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self._fail(name, f"must be a boolean (true/false), got {value!r}")

    def choice(self, name: _Str, default: _Str, choices: tuple[_Str, ...]) -> _Str:
        value = self.str(name, default).strip().lower()
        if value not in choices:
            raise self._fail(name, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def path(self, name: _Str, default: Path) -> Path:
        value = self._raw(name)
        return Path(value).expanduser() if value else default


def data_dir(env: Env) -> Path:
    """COGRAPH_DATA_DIR, default ./.cograph, as an absolute path."""
    return env.path("COGRAPH_DATA_DIR", Path(".cograph")).resolve()

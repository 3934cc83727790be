"""Typed, prefixed, fail-fast configuration read from the environment.

Each service declares a frozen dataclass of settings and builds it with an `Env` at start-up,
so a typo'd or out-of-range value stops the process with a message naming the variable
instead of surfacing as a confusing failure later.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from svckit.internal_auth import MIN_SECRET_BYTES

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

    def refuse(self, names: Iterable[_Str], why: _Str) -> None:
        """Raises ConfigError naming each of `names` that is set: removed settings, so a
        deployment that still sets one learns it at start instead of silently getting a
        different behaviour. Not a read (scripts/config_docs.py does not list them)."""
        present = [self._prefix + name for name in names if self._raw(name) is not None]
        if present:
            raise ConfigError(f"{', '.join(sorted(present))}: {why}")

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


INTERNAL_SECRET_FILE_VAR = "COGRAPH_INTERNAL_SECRET_FILE"
INTERNAL_SECRET_VAR = "COGRAPH_INTERNAL_SECRET"
# Where `cograph up` keeps the secret, and where operator commands look when neither
# variable is set.
INTERNAL_SECRET_FILE_NAME = "internal.secret"


def _read_secret_file(variable: str, path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except OSError as err:
        raise ConfigError(f"{variable}: cannot read {path}: {err.strerror or err}") from None


def _checked_secret(origin: str, secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(
            f"{origin}: the internal secret must be at least {MIN_SECRET_BYTES} bytes, "
            f"got {len(secret)}"
        )
    return secret


def internal_secret(env: Env) -> bytes:
    """The secret that signs and verifies calls between services; required, no default.

    COGRAPH_INTERNAL_SECRET_FILE names a file holding it (a Kubernetes Secret mount, or the
    one `cograph up` writes); COGRAPH_INTERNAL_SECRET holds the value itself. Surrounding
    whitespace (a file's trailing newline) is not part of it.
    """
    file_value = env.optional_str(INTERNAL_SECRET_FILE_VAR)
    value = env.optional_str(INTERNAL_SECRET_VAR)
    if file_value and value:
        raise ConfigError(
            f"{INTERNAL_SECRET_FILE_VAR} and {INTERNAL_SECRET_VAR} are both set; set one"
        )
    if file_value:
        path = Path(file_value).expanduser()
        return _checked_secret(
            f"{INTERNAL_SECRET_FILE_VAR} ({path})",
            _read_secret_file(INTERNAL_SECRET_FILE_VAR, path),
        )
    if value:
        return _checked_secret(INTERNAL_SECRET_VAR, value.strip().encode())
    raise ConfigError(
        f"{INTERNAL_SECRET_FILE_VAR} (or {INTERNAL_SECRET_VAR}) is required but not set: "
        "the secret that signs calls between services"
    )


def optional_secret(
    env: Env, value_var: str, file_var: str, *, min_bytes: int, what: str
) -> bytes | None:
    """A secret other than the internal one (a webhook's), read as that one is: `file_var`
    names a file holding it (a Kubernetes Secret mount), `value_var` holds the value; not
    both. None when neither is set; shorter than `min_bytes` stops the start. Surrounding
    whitespace (a file's trailing newline) is not part of it."""
    file_value = env.optional_str(file_var)
    value = env.optional_str(value_var)
    if file_value and value:
        raise ConfigError(f"{file_var} and {value_var} are both set; set one")
    if file_value:
        path = Path(file_value).expanduser()
        origin = f"{file_var} ({path})"
        secret = _read_secret_file(file_var, path)
    elif value:
        origin = value_var
        secret = value.strip().encode()
    else:
        return None
    if len(secret) < min_bytes:
        raise ConfigError(
            f"{origin}: {what} must be at least {min_bytes} bytes, got {len(secret)} "
            f"(e.g. `openssl rand -hex {min_bytes}`)"
        )
    return secret


def operator_internal_secret(env: Env) -> bytes:
    """The secret for a command run on a machine where `cograph up` runs the services.

    The variables win, as for a service; without them the file `cograph up` keeps in the
    data directory is read.
    """
    if env.optional_str(INTERNAL_SECRET_FILE_VAR) or env.optional_str(INTERNAL_SECRET_VAR):
        return internal_secret(env)
    path = data_dir(env) / INTERNAL_SECRET_FILE_NAME
    if not path.exists():
        raise ConfigError(
            f"{INTERNAL_SECRET_FILE_VAR} is not set and {path} does not exist: run "
            f"`cograph up` once (it creates the file) or set {INTERNAL_SECRET_FILE_VAR}"
        )
    return _checked_secret(str(path), _read_secret_file(INTERNAL_SECRET_FILE_VAR, path))


@dataclass(frozen=True)
class BreakerSettings:
    """The query-embedding circuit breaker (cograph_api.embedder_client.CircuitBreaker)."""

    failures: int  # consecutive unavailable answers that open it
    cooldown_s: float  # how long it stays open before one probe goes through


def embedder_breaker(env: Env) -> BreakerSettings:
    return BreakerSettings(
        failures=env.int("EMBEDDER_BREAKER_FAILURES", 3, min=1, max=1000),
        cooldown_s=env.float("EMBEDDER_BREAKER_COOLDOWN_S", 5.0, min=0.1, max=600.0),
    )


def query_embed_timeout_s(env: Env) -> float:
    """The deadline of a query's embedding, in seconds: `EMBEDDER_TIMEOUT_S` (2), which
    `EMBEDDING_TIMEOUT_QUERY` overrides when set (the name some deployments already use)."""
    fallback = env.float("EMBEDDER_TIMEOUT_S", 2.0, min=0.01, max=120.0)
    return env.float("EMBEDDING_TIMEOUT_QUERY", fallback, min=0.01, max=120.0)


def ensure_writable_dir(path: Path, variable: str) -> Path:
    """Creates `path` if needed and proves it writable (a file is made and removed), or
    raises ConfigError naming the variable: a read-only or foreign-owned directory must
    stop the start in one line, not as a traceback from whatever first writes there."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise ConfigError(f"{variable}: {path} is not a writable directory ({why})") from None
    return path


def http_url(variable: str, value: str) -> str:
    """`value` when it is an http(s) URL with a host, else ConfigError naming the variable:
    a typo in an endpoint fails the start in one line rather than every call later."""
    scheme, sep, rest = value.strip().partition("://")
    host = rest.split("/", 1)[0].rpartition("@")[2]
    if not sep or scheme.lower() not in ("http", "https") or not host or host.startswith(":"):
        raise ConfigError(
            f"{variable}: must be an http:// or https:// URL with a host, got {value!r}"
        )
    return value.strip()

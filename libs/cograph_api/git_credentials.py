"""Git credentials for private repositories, kept apart from the sources that use them.

A source URL is shown to every key that may read the repository, so it must never carry a
secret. An operator registers credentials instead, in a directory the retrieval service
reads (`RETRIEVAL_CREDENTIALS_DIR`, by default `$COGRAPH_DATA_DIR/credentials`; on
Kubernetes the `cograph-git-credentials` Secret mounted there):

    credentials.json      which entry serves which sources (no secret in it)
    <name>.token          an https token, one line
    <name>.key            an ssh private key (deploy key)
    <name>.known_hosts    the ssh host keys the server must present (optional)

`credentials.json` holds `{"credentials": [entry, ...]}`; an entry is

    {"name": "acme", "url": "https://github.com/acme/",
     "username": "x-access-token", "token_file": "acme.token"}
    {"name": "infra", "url": "ssh://git@gitlab.example.com/infra/",
     "ssh_key_file": "infra.key", "known_hosts_file": "infra.known_hosts"}

`url` is a prefix: scheme, host, port (the scheme's default when absent) and leading path
segments must all match the source's; `git@host:path` counts as ssh. The entry with the
most path segments wins. Secret files are named relative to the directory (no `/`), and
refused when other users may read them. The service reads the directory again at every
use, so adding or rotating a credential needs no restart.

The retrieval service and the `cograph credentials` command both use this module; what the
service hands to git is in retrieval/indexing/credentials.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from svckit.config import Env, data_dir

INDEX_FILE = "credentials.json"
# The largest secret file read: a token is well under 1 KiB, an RSA-4096 key about 3 KiB.
MAX_SECRET_BYTES = 64 * 1024
MAX_INDEX_BYTES = 1024 * 1024
DEFAULT_PORTS = {"https": 443, "ssh": 22}

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_USERNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+-]{0,127}$")
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^@/:]+):(?P<path>.*)$")
_HOST = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")

Kind = Literal["token", "ssh"]


def credentials_directory(env: Env) -> Path:
    """RETRIEVAL_CREDENTIALS_DIR, by default `$COGRAPH_DATA_DIR/credentials` (read by the
    retrieval service and by `cograph credentials`)."""
    return env.path("RETRIEVAL_CREDENTIALS_DIR", data_dir(env) / "credentials").absolute()


class CredentialError(ValueError):
    """A credentials file, entry or secret file that cannot be used; the message names the
    entry and the file by name (never a secret, never a server path)."""


@dataclass(frozen=True)
class Prefix:
    """Where a credential applies: scheme, host, port and leading path segments."""

    scheme: str  # https | ssh
    host: str
    port: int
    path: tuple[str, ...]

    def covers(self, other: Prefix) -> bool:
        return (
            (self.scheme, self.host, self.port) == (other.scheme, other.host, other.port)
            and len(self.path) <= len(other.path)
            and other.path[: len(self.path)] == self.path
        )


def _segments(path: str) -> tuple[str, ...]:
    parts = [unquote(p) for p in path.split("/") if p]
    if parts and parts[-1].endswith(".git"):
        parts[-1] = parts[-1][: -len(".git")]  # `acme/repo` and `acme/repo.git` are one
    return tuple(p for p in parts if p)


def url_prefix(text: str) -> Prefix | None:
    """The Prefix of an https or ssh URL (or `user@host:path`); None for anything else
    (git://, file://, a path), which no credential serves."""
    value = text.strip()
    if "://" not in value:
        scp = _SCP_LIKE.match(value)
        if scp is None or value.startswith(("/", "~", ".")):
            return None
        host = scp.group("host").lower().rstrip(".")
        return Prefix("ssh", host, DEFAULT_PORTS["ssh"], _segments(scp.group("path")))
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower().rstrip(".")
    return Prefix(scheme, host, port or DEFAULT_PORTS[scheme], _segments(parts.path))


@dataclass(frozen=True)
class Credential:
    """One entry of credentials.json."""

    name: str
    url: str
    prefix: Prefix
    username: str = ""
    token_file: str = ""
    ssh_key_file: str = ""
    known_hosts_file: str = ""

    @property
    def kind(self) -> Kind:
        return "token" if self.token_file else "ssh"

    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.token_file, self.ssh_key_file, self.known_hosts_file) if f)

    def to_json(self) -> dict[str, str]:
        fields = {
            "name": self.name,
            "url": self.url,
            "username": self.username,
            "token_file": self.token_file,
            "ssh_key_file": self.ssh_key_file,
            "known_hosts_file": self.known_hosts_file,
        }
        return {k: v for k, v in fields.items() if v}


def credential(
    name: str,
    url: str,
    *,
    username: str = "",
    token_file: str = "",
    ssh_key_file: str = "",
    known_hosts_file: str = "",
) -> Credential:
    """A checked Credential (CredentialError says what is wrong)."""
    if not _NAME.match(name):
        raise CredentialError(
            f"credential name {name!r}: lower-case letters, digits, '.', '_' and '-', "
            "at most 63 characters"
        )
    where = f"credential {name!r}"
    authority = url.split("://", 1)[1].split("/", 1)[0] if "://" in url else url.split(":", 1)[0]
    user, at, _ = authority.rpartition("@")
    ssh = not url.lower().startswith("https:")
    if any(c.isspace() or ord(c) < 32 for c in url) or (at and (not ssh or ":" in user)):
        # An ssh URL may name its user (git@); an https one none (the entry's username
        # says it), and no URL ever holds a password.
        raise CredentialError(
            f"{where}: its url must hold no password, and an https url no user name"
        )
    prefix = url_prefix(url)
    if prefix is None or not _HOST.match(prefix.host):
        raise CredentialError(
            f"{where}: url {url!r} is not an https or ssh URL prefix "
            "(https://host/path/, ssh://git@host/path/ or git@host:path)"
        )
    if bool(token_file) == bool(ssh_key_file):
        raise CredentialError(f"{where}: give either token_file (https) or ssh_key_file (ssh)")
    if token_file and prefix.scheme != "https":
        raise CredentialError(f"{where}: a token serves https URLs; {url!r} is not one")
    if ssh_key_file and prefix.scheme != "ssh":
        raise CredentialError(f"{where}: an ssh key serves ssh URLs; {url!r} is not one")
    if token_file and not _USERNAME.match(username):
        raise CredentialError(
            f"{where}: an https token needs a username (x-access-token on GitHub, oauth2 or "
            "the deploy token's user on GitLab)"
        )
    if ssh_key_file and username:
        raise CredentialError(f"{where}: an ssh entry takes its user from the URL (git@...)")
    if known_hosts_file and not ssh_key_file:
        raise CredentialError(f"{where}: known_hosts_file belongs to an ssh entry")
    for file in (token_file, ssh_key_file, known_hosts_file):
        if file and (not _FILE.match(file) or file in (INDEX_FILE,)):
            raise CredentialError(
                f"{where}: {file!r} must be a file name in the credentials directory "
                "(letters, digits, '.', '_', '-'; no '/')"
            )
    return Credential(name, url, prefix, username, token_file, ssh_key_file, known_hosts_file)


def _from_json(raw: Any, position: int) -> Credential:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise CredentialError(f"entry {position} is not an object of strings")
    known = {"name", "url", "username", "token_file", "ssh_key_file", "known_hosts_file"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CredentialError(f"entry {position}: unknown fields {', '.join(unknown)}")
    if "name" not in raw or "url" not in raw:
        raise CredentialError(f"entry {position} needs a name and a url")
    return credential(**raw)


def load(directory: Path) -> list[Credential]:
    """The entries of `directory`/credentials.json; none when the directory or the file
    does not exist."""
    index = directory / INDEX_FILE
    try:
        with index.open("rb") as handle:
            data = handle.read(MAX_INDEX_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as err:
        raise CredentialError(f"{INDEX_FILE} cannot be read: {err.strerror}") from None
    if len(data) > MAX_INDEX_BYTES:
        raise CredentialError(f"{INDEX_FILE} is larger than {MAX_INDEX_BYTES} bytes")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CredentialError(f"{INDEX_FILE} is not valid JSON: {err}") from None
    entries = parsed.get("credentials") if isinstance(parsed, dict) else None
    if not isinstance(entries, list):
        raise CredentialError(f'{INDEX_FILE} must be an object {{"credentials": [...]}}')
    found = [_from_json(raw, i) for i, raw in enumerate(entries)]
    names = [c.name for c in found]
    if len(set(names)) != len(names):
        raise CredentialError(f"{INDEX_FILE} names an entry twice")
    return found


def best_match(entries: Sequence[Credential], source: str) -> Credential | None:
    """The entry serving `source`: the one with the longest matching prefix (the first of
    those in the file on a tie); None when none matches."""
    target = url_prefix(source)
    if target is None:
        return None
    matching = [c for c in entries if c.prefix.covers(target)]
    return max(matching, key=lambda c: len(c.prefix.path), default=None)


def secret_file(directory: Path, entry: Credential, file: str, what: str) -> Path:
    """The path of one of `entry`'s files, once it is a regular file other users cannot
    read. Group read is allowed for a file the service does not own (a Kubernetes Secret
    mounted with fsGroup); a file it owns must be private to it, as ssh requires."""
    where = f"credential {entry.name!r}"
    path = directory / file
    try:
        info = path.stat()  # follows the links a Secret volume is made of
    except FileNotFoundError:
        raise CredentialError(f"{where}: its {what} file {file} does not exist") from None
    except OSError as err:
        raise CredentialError(f"{where}: its {what} file {file}: {err.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise CredentialError(f"{where}: its {what} file {file} is not a regular file")
    if info.st_size > MAX_SECRET_BYTES:
        raise CredentialError(f"{where}: its {what} file {file} is over {MAX_SECRET_BYTES} B")
    mode = stat.S_IMODE(info.st_mode)
    secret = what != "known_hosts"
    if secret and (mode & 0o007 or (info.st_uid == os.getuid() and mode & 0o077)):
        raise CredentialError(
            f"{where}: its {what} file {file} may be read by other users (mode {mode:04o}); "
            "make it 0600 (or 0400)"
        )
    return path


def read_token(directory: Path, entry: Credential) -> str:
    """The https token of `entry`: its file's one line."""
    path = secret_file(directory, entry, entry.token_file, "token")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        raise CredentialError(f"credential {entry.name!r}: its token cannot be read") from None
    if not token or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in token):
        raise CredentialError(
            f"credential {entry.name!r}: its token file {entry.token_file} must hold one "
            "token on one line"
        )
    return token


def private_directory(directory: Path) -> None:
    """Creates `directory` (mode 0700), or makes an existing one 0700."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)


def write_private(path: Path, data: bytes) -> None:
    """Writes `path` atomically, mode 0600 from the start (never briefly readable)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def save(directory: Path, entries: Sequence[Credential]) -> None:
    """Writes credentials.json (mode 0600) in `directory` (made 0700)."""
    private_directory(directory)
    body = {"credentials": [c.to_json() for c in entries]}
    write_private(directory / INDEX_FILE, (json.dumps(body, indent=2) + "\n").encode())

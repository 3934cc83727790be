"""How a registered credential reaches git, for the one git process that needs it.

The credentials are the operator's (cograph_api.git_credentials: a directory of entries and
secret files). For a remote source this module builds a `GitAuth`: git configuration given
with `-c` and environment variables set for that process only. No secret is ever on a
command line, in a repository's .git/config, in a log or in an error:

- every call that reaches a remote first empties git's list of credential helpers
  (`credential.helper=`), so git neither asks the operator's own helpers (a keychain, a
  `store` file) for a source some key named, nor hands them a token to keep;
- https with a token: one helper that answers git's `get` from two variables,
  GIT_COGRAPH_USERNAME and GIT_COGRAPH_PASSWORD, set in that git process's environment
  only (git.py drops GIT_* variables the service inherits). The helper's text on the
  command line holds their names, not their values. The URL stays clean, so the clone's
  .git/config records no credential;
- ssh with a deploy key: GIT_SSH_COMMAND adds `-i <key> -o IdentitiesOnly=yes
  -o IdentityAgent=none` (that key and no other) and `-o StrictHostKeyChecking=yes`, with
  the entry's known_hosts file when it has one (else the service user's).

The directory is read again at every use: adding or rotating a credential needs no restart.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cograph_api.git_credentials import (
    Credential,
    CredentialError,
    best_match,
    load,
    read_token,
    secret_file,
)
from retrieval.indexing.git import git_environment
from svckit.errors import FailedPrecondition

USERNAME_VARIABLE = "GIT_COGRAPH_USERNAME"
PASSWORD_VARIABLE = "GIT_COGRAPH_PASSWORD"
# Empties the list of helpers from the operator's configuration (an empty value resets it).
NO_HELPERS = ("credential.helper=",)
# git runs a `!` helper through the shell with the action (get, store, erase) as $1; only
# `get` is answered, and from the environment.
ENVIRONMENT_HELPER = (
    'credential.helper=!f() { test "$1" = get || exit 0; '
    f'printf \'username=%s\\npassword=%s\\n\' "${USERNAME_VARIABLE}" "${PASSWORD_VARIABLE}"; '
    "}; f"
)


@dataclass(frozen=True)
class GitAuth:
    """What one git call reaching a remote runs with: `-c` entries and variables."""

    config: tuple[str, ...] = NO_HELPERS
    env: Mapping[str, str] = field(default_factory=dict)


def ssh_command(key: Path, known_hosts: Path | None, base: str | None = None) -> str:
    """GIT_SSH_COMMAND for a deploy key: the guarded command (git.git_environment's) with
    that key only and strict host-key checking."""
    command = base if base is not None else git_environment(base={})["GIT_SSH_COMMAND"]
    options = [
        "-i",
        str(key),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "IdentityAgent=none",
        "-o",
        "StrictHostKeyChecking=yes",
    ]
    if known_hosts is not None:
        options += ["-o", f"UserKnownHostsFile={known_hosts}"]
    return " ".join([command, *(shlex.quote(o) for o in options)])


def auth_of(directory: Path, entry: Credential | None) -> GitAuth:
    """The GitAuth of `entry` (None: no credential, helpers emptied all the same)."""
    if entry is None:
        return GitAuth()
    if entry.kind == "token":
        token = read_token(directory, entry)
        return GitAuth(
            (*NO_HELPERS, ENVIRONMENT_HELPER),
            {USERNAME_VARIABLE: entry.username, PASSWORD_VARIABLE: token},
        )
    key = secret_file(directory, entry, entry.ssh_key_file, "ssh key")
    known_hosts = (
        secret_file(directory, entry, entry.known_hosts_file, "known_hosts")
        if entry.known_hosts_file
        else None
    )
    return GitAuth(NO_HELPERS, {"GIT_SSH_COMMAND": ssh_command(key, known_hosts)})


@dataclass(frozen=True)
class GitCredentials:
    """The operator's credentials directory (RETRIEVAL_CREDENTIALS_DIR); None: none."""

    directory: Path | None = None

    def auth_for(self, source: str) -> GitAuth:
        """What git runs with to reach the remote `source` (FailedPrecondition when its
        credential cannot be used; the message names the entry, never the secret)."""
        if self.directory is None:
            return GitAuth()
        try:
            entries = load(self.directory)
            return auth_of(self.directory, best_match(entries, source))
        except CredentialError as err:
            raise FailedPrecondition(
                f"git credentials (RETRIEVAL_CREDENTIALS_DIR): {err}; an operator must fix "
                "them (docs/credentials.md)"
            ) from None

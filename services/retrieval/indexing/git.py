"""The one way the retrieval service runs git.

Sources come from API callers, so every git process is started the same guarded way:

- configuration that cannot run a program chosen by a repository or a URL: no hooks
  (`core.hooksPath=/dev/null`), no fsmonitor, the `ext::` transport refused, and
  `GIT_ALLOW_PROTOCOL` naming the only transports git may use (https, ssh, git; `file`
  only when the caller says the source is an accepted local one);
- no prompts: no terminal, no askpass program, ssh in BatchMode, stdin from /dev/null;
- a deadline on every call, after which the whole process group (git and the ssh or
  remote helper it started) is killed;
- a cap on the output kept, so a hostile remote or a huge tree cannot fill memory;
- a scrubbed environment: inherited `GIT_*` variables that point git at another
  repository, configuration or program are dropped;
- no HTTP redirects (`http.followRedirects=false`): a redirect would lead to a host the
  source policy never checked;
- the network configuration the source policy returned for a source (its https fetches
  pinned to the addresses it checked, no proxy), given to the calls that reach the
  network (`config`), with the source's credential, when the operator registered one
  (indexing/credentials.py: configuration plus variables set for that process only,
  `env`);
- error messages without the userinfo of any URL git quotes in them.

Callers put `--` before positional arguments that come from a request; this module only
builds the command line around them.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from retrieval.indexing.redaction import without_userinfo

NETWORK_PROTOCOLS = ("https", "ssh", "git")
# Commands that read the local repository (rev-parse, ls-files, remote get-url): seconds.
QUICK_TIMEOUT_S = 30.0
# What a command may print before it is cut off; ls-files of a very large tree and the
# porcelain blame of a 1 MB file both stay well below it.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
_MAX_STDERR_BYTES = 64 * 1024
_READ_CHUNK = 65536

# Options in front of every command: none of them can be overridden by a repository's
# own configuration, because command-line configuration wins.
_HARDENING = (
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.askPass=",
    "-c",
    "credential.interactive=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "http.followRedirects=false",
)
# Inherited variables kept: where the operator's own configuration and CA bundle live.
_KEPT_GIT_VARIABLES = frozenset(
    {
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_HTTP_USER_AGENT",
    }
)


class GitError(RuntimeError):
    """A git command failed, timed out or printed too much; the message says which."""


class GitTimeout(GitError):
    """A git command ran past its deadline and was killed."""


def git_environment(
    *, allow_file: bool = False, ceiling: Path | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of every git process (see the module docstring)."""
    inherited = os.environ if base is None else base
    env = {
        k: v for k, v in inherited.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARIABLES
    }
    protocols = [*NETWORK_PROTOCOLS, "file"] if allow_file else list(NETWORK_PROTOCOLS)
    env.update(
        {
            "GIT_ALLOW_PROTOCOL": ":".join(protocols),
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "SSH_ASKPASS_REQUIRE": "never",
            "GCM_INTERACTIVE": "never",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o ConnectTimeout=10",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
        }
    )
    if ceiling is not None:
        # git looks for the repository in the directory itself and never above it: a
        # clone that lost its .git cannot make git act on an enclosing working tree.
        env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    return env


def git_command(
    args: Sequence[str], cwd: Path | None = None, config: Sequence[str] = ()
) -> list[str]:
    extra = [part for entry in config for part in ("-c", entry)]
    return [
        "git",
        *_HARDENING,
        *extra,
        *(["-C", str(cwd)] if cwd is not None else []),
        *args,
    ]


def kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _describe(args: Sequence[str]) -> str:
    words = [a for a in args if not a.startswith("-")][:1]
    return "git " + (words[0] if words else "")


def run_git(
    args: Sequence[str],
    cwd: Path | None = None,
    *,
    timeout_s: float = QUICK_TIMEOUT_S,
    allow_file: bool = False,
    ceiling: Path | None = None,
    max_output: int = MAX_OUTPUT_BYTES,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> bytes:
    """Runs git with the guards above; its stdout, or GitError. Blocking: call it from a
    worker thread (run_git_async does). `config`: `key=value` entries given with -c;
    `env`: variables set for this process on top of the guarded environment."""
    what = _describe(args)
    environment = git_environment(allow_file=allow_file, ceiling=ceiling)
    environment.update(env or {})
    process = subprocess.Popen(
        git_command(args, cwd, config),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        start_new_session=True,  # its own process group, killed as a whole
        close_fds=True,
    )
    assert process.stdout is not None and process.stderr is not None
    out = bytearray()
    err = bytearray()
    deadline = time.monotonic() + timeout_s
    failure: GitError | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, out)
        selector.register(process.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                failure = GitTimeout(f"{what} did not finish within {timeout_s:g}s")
                break
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
                if buffer is err and len(err) > _MAX_STDERR_BYTES:
                    del err[: len(err) - _MAX_STDERR_BYTES]
            if len(out) > max_output:
                failure = GitError(f"{what} printed more than {max_output} bytes")
                break
    if failure is not None:
        kill_group(process)
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.wait()
        failure = failure or GitTimeout(f"{what} did not finish within {timeout_s:g}s")
    finally:
        process.stdout.close()
        process.stderr.close()
    if failure is not None:
        raise failure
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        detail = without_userinfo(lines[-1])[:500] if lines else f"exit status {process.returncode}"
        raise GitError(f"{what} failed: {detail}")
    return bytes(out)


def run_git_text(
    args: Sequence[str],
    cwd: Path | None = None,
    *,
    timeout_s: float = QUICK_TIMEOUT_S,
    allow_file: bool = False,
    ceiling: Path | None = None,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> str:
    """run_git's stdout as stripped text."""
    out = run_git(
        args,
        cwd,
        timeout_s=timeout_s,
        allow_file=allow_file,
        ceiling=ceiling,
        config=config,
        env=env,
    )
    return out.decode(errors="replace").strip()


async def run_git_async(
    args: Sequence[str],
    cwd: Path | None = None,
    *,
    timeout_s: float = QUICK_TIMEOUT_S,
    allow_file: bool = False,
    max_output: int = MAX_OUTPUT_BYTES,
    config: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> bytes:
    """run_git on a worker thread, so the event loop never waits on git."""
    return await asyncio.to_thread(
        run_git,
        args,
        cwd,
        timeout_s=timeout_s,
        allow_file=allow_file,
        max_output=max_output,
        config=config,
        env=env,
    )

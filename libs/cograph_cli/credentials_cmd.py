"""`cograph credentials add|list|remove`: the git credentials retrieval uses for private
repositories (cograph_api.git_credentials; docs/credentials.md).

They are files on the server, in RETRIEVAL_CREDENTIALS_DIR (by default
`$COGRAPH_DATA_DIR/credentials`, mode 0700, files 0600): an operator's act, not an API
call, so no key can read or change them. A token is read from a file or stdin, never from
the command line (it would show in `ps` and the shell's history); `list` never prints a
secret. The service reads the directory again at each use: no restart. On Kubernetes the
directory is the `cograph-git-credentials` Secret (deploy/README.md), edited with kubectl.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cograph_api.git_credentials import (
    CredentialError,
    credential,
    credentials_directory,
    load,
    private_directory,
    save,
    write_private,
)
from cograph_cli.cli_errors import EXIT_USAGE, print_error
from svckit.config import Env

_MAX_SECRET_INPUT = 64 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "credentials", help="git credentials for private repositories (operator, local files)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the credentials directory (default: $RETRIEVAL_CREDENTIALS_DIR or "
        "$COGRAPH_DATA_DIR/credentials)",
    )
    actions = parser.add_subparsers(dest="credentials_command", required=True)

    add = actions.add_parser(
        "add",
        help="register a token (https) or a deploy key (ssh) for a URL prefix",
        description=(
            "Examples: `cograph credentials add acme https://github.com/acme/ --username "
            "x-access-token --token-file token.txt`; `... add infra "
            "ssh://git@gitlab.example.com/infra/ --ssh-key deploy_key --known-hosts "
            "known_hosts`. The secret is copied into the credentials directory (mode 0600)."
        ),
    )
    add.add_argument("name", help="a name for the entry: lower-case letters, digits, . _ -")
    add.add_argument("url", help="the sources it serves: https://host/prefix or ssh://host/...")
    add.add_argument("--username", default="", help="https: the token's user name")
    secret = add.add_mutually_exclusive_group(required=True)
    secret.add_argument("--token-file", type=Path, help="https: a file holding the token")
    secret.add_argument(
        "--token-stdin", action="store_true", help="https: read the token from stdin"
    )
    secret.add_argument("--ssh-key", type=Path, help="ssh: the private key file (deploy key)")
    add.add_argument("--known-hosts", type=Path, help="ssh: the host keys to trust")
    add.add_argument("--replace", action="store_true", help="replace an entry of that name")
    add.add_argument("--json", action="store_true", help="print the stored entry as JSON")
    add.set_defaults(handler=_add)

    listing = actions.add_parser("list", help="list the entries (never their secrets)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_list)

    remove = actions.add_parser("remove", help="remove an entry and its files")
    remove.add_argument("name")
    remove.add_argument("--json", action="store_true", help="print the outcome as JSON")
    remove.set_defaults(handler=_remove)


def _directory(args: argparse.Namespace) -> Path:
    chosen: Path | None = args.dir
    return chosen.expanduser().absolute() if chosen else credentials_directory(Env())


def _read_input(path: Path | None, what: str) -> bytes:
    try:
        data = sys.stdin.buffer.read(_MAX_SECRET_INPUT + 1) if path is None else path.read_bytes()
    except OSError as err:
        raise CredentialError(f"the {what} cannot be read: {err.strerror}") from None
    if not data.strip() or len(data) > _MAX_SECRET_INPUT:
        raise CredentialError(f"the {what} is empty or larger than {_MAX_SECRET_INPUT} bytes")
    return data


def _add(args: argparse.Namespace) -> int:
    directory = _directory(args)
    try:
        entries = load(directory)
        if any(e.name == args.name for e in entries) and not args.replace:
            raise CredentialError(f"credential {args.name!r} exists; pass --replace")
        if args.ssh_key is not None:
            files = {"ssh_key_file": f"{args.name}.key"}
            if args.known_hosts is not None:
                files["known_hosts_file"] = f"{args.name}.known_hosts"
            entry = credential(args.name, args.url, username=args.username, **files)
            contents = {entry.ssh_key_file: _read_input(args.ssh_key, "ssh key")}
            if args.known_hosts is not None:
                contents[entry.known_hosts_file] = _read_input(args.known_hosts, "known_hosts")
        else:
            if args.known_hosts is not None:
                raise CredentialError("--known-hosts goes with --ssh-key")
            entry = credential(
                args.name, args.url, username=args.username, token_file=f"{args.name}.token"
            )
            token = _read_input(None if args.token_stdin else args.token_file, "token")
            contents = {entry.token_file: token.strip() + b"\n"}
    except CredentialError as err:
        print_error(args.json, "invalid_argument", str(err))
        return EXIT_USAGE
    private_directory(directory)
    for name, data in contents.items():
        write_private(directory / name, data)
    save(directory, [*(e for e in entries if e.name != entry.name), entry])
    if args.json:
        print(json.dumps({**entry.to_json(), "kind": entry.kind, "directory": str(directory)}))
    else:
        print(f"credential {entry.name} ({entry.kind}) serves {entry.url}; stored in {directory}")
    return 0


def _list(args: argparse.Namespace) -> int:
    try:
        entries = load(_directory(args))
    except CredentialError as err:
        print_error(args.json, "invalid_argument", str(err))
        return EXIT_USAGE
    if args.json:
        print(json.dumps([{**e.to_json(), "kind": e.kind} for e in entries], indent=2))
        return 0
    for e in entries:
        who = f" as {e.username}" if e.username else ""
        extra = " (with known_hosts)" if e.known_hosts_file else ""
        print(f"{e.name}\t{e.kind}{who}\t{e.url}{extra}")
    if not entries:
        print("no credentials")
    return 0


def _remove(args: argparse.Namespace) -> int:
    directory = _directory(args)
    try:
        entries = load(directory)
    except CredentialError as err:
        print_error(args.json, "invalid_argument", str(err))
        return EXIT_USAGE
    found = [e for e in entries if e.name == args.name]
    if not found:
        print_error(args.json, "not_found", f"no credential {args.name!r}")
        return 1
    save(directory, [e for e in entries if e.name != args.name])
    for file in found[0].files():
        (directory / file).unlink(missing_ok=True)
    if args.json:
        print(json.dumps({"name": args.name, "removed": True}))
    else:
        print(f"credential {args.name} removed")
    return 0

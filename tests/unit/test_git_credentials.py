"""Credentials for private repositories: a source holding a secret is refused without being
quoted, a stored one is shown redacted (admins: no secret; other keys: no userinfo, no
server path), registered credentials match by URL prefix, their files are refused when
others may read them or they are missing, and what reaches git is a helper answering from
one process's environment (checked with the real `git credential fill`) or an ssh command
with that key only."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from cograph_api import git_credentials as gc
from cograph_cli.main import main as cograph
from retrieval.indexing.credentials import (
    ENVIRONMENT_HELPER,
    NO_HELPERS,
    PASSWORD_VARIABLE,
    USERNAME_VARIABLE,
    GitCredentials,
    ssh_command,
)
from retrieval.indexing.git import GitError, git_environment, run_git
from retrieval.indexing.redaction import (
    admin_view,
    reader_view,
    scrub,
    strip_secrets,
    without_userinfo,
)
from retrieval.indexing.source_policy import LocalPolicy, parse_source
from retrieval.settings import IndexSettings
from svckit.errors import FailedPrecondition, InvalidArgument, PermissionDenied

SECRET = "s3cr3t-Pa55"
TOKEN = "ghp_" + "A1b2" * 9

# ------------------------------------------------------------------ refused sources


@pytest.mark.parametrize(
    "source",
    [
        f"https://deploy:{SECRET}@git.example.com/acme/app.git",
        f"https://deploy:{SECRET}@git.example.com:bad/acme/app.git",  # malformed port too
        f"http://deploy:{SECRET}@git.example.com/acme/app.git",  # refused scheme too
        f"ssh://git:{SECRET}@git.example.com/acme/app.git",
        "https://deploy:@git.example.com/acme/app.git",  # an empty password is one too
        f"https://{TOKEN}@github.com/acme/app.git",
        "https://glpat-abcdefghij1234567890@gitlab.com/acme/app.git",
        f"https://oauth2:{SECRET}@gitlab.com/acme/app.git",
        "https://" + "a1" * 20 + "@git.example.com/acme/app.git",  # 40 hex: an old token
        f"{TOKEN}@github.com:acme/app.git",
    ],
)
def test_a_source_holding_a_secret_is_refused_without_quoting_it(source: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_source(source)
    message = caught.value.message
    assert "register the credential" in message and "docs/credentials.md" in message
    assert SECRET not in message and TOKEN not in message and "glpat" not in message


@pytest.mark.parametrize(
    "source",
    [
        "https://deploy@git.example.com/acme/app.git",  # a plain user name: allowed
        "https://x-access-token@github.com/acme/app.git",
        "git@github.com:acme/app.git",
        "ssh://git@gitlab.com:2222/acme/app.git",
    ],
)
def test_a_plain_user_name_is_not_a_secret(source: str) -> None:
    assert parse_source(source).text == source


# ------------------------------------------------------------------ redaction


@pytest.mark.parametrize(
    ("stored", "admin", "reader"),
    [
        (
            f"https://deploy:{SECRET}@10.0.0.5/acme/app.git",
            "https://deploy@10.0.0.5/acme/app.git",
            "https://10.0.0.5/acme/app.git",
        ),
        (
            f"https://{TOKEN}@github.com/acme/app.git",
            "https://github.com/acme/app.git",
            "https://github.com/acme/app.git",
        ),
        ("git@github.com:acme/app.git", "git@github.com:acme/app.git", "github.com:acme/app.git"),
        ("ssh://git@h.example/a/b", "ssh://git@h.example/a/b", "ssh://h.example/a/b"),
        (
            "https://github.com/acme/app",
            "https://github.com/acme/app",
            "https://github.com/acme/app",
        ),
        ("/srv/git/team/app", "/srv/git/team/app", "local"),
        ("file:///srv/git/team/app", "file:///srv/git/team/app", "local"),
        ("~/work/app", "~/work/app", "local"),
    ],
)
def test_views_of_a_stored_source(stored: str, admin: str, reader: str) -> None:
    assert admin_view(stored) == admin
    assert reader_view(stored) == reader
    assert SECRET not in admin_view(stored) + reader_view(stored)


def test_scrub_removes_secrets_userinfo_and_server_paths() -> None:
    stored = f"https://deploy:{SECRET}@10.0.0.5/acme/app.git"
    detail = (
        f"not looked up: source {stored!r}: 10.0.0.5 does not resolve; and "
        f"fatal: unable to access 'https://other:{SECRET}@x.example/r/': 403"
    )
    for admin in (True, False):
        shown = scrub(detail, stored, admin=admin)
        assert SECRET not in shown and "other" not in shown and "deploy" not in shown, shown
        assert "'https://10.0.0.5/acme/app.git'" in shown
    local = "/srv/git/team/app"
    error = f"fatal: '{local}' does not appear to be a git repository; see /var/lib/cograph/x"
    reader = scrub(error, local, admin=False)
    assert "/srv" not in reader and "/var/lib" not in reader
    assert "'local'" in reader and "<path>" in reader
    assert scrub(error, local, admin=True) == error
    # A URL's own path is not a server path.
    url_error = "fatal: repository 'https://github.com/acme/app/' not found"
    assert scrub(url_error, "https://github.com/acme/app", admin=False) == url_error


def test_strip_secrets_keeps_a_plain_user_and_sources_without_userinfo() -> None:
    assert strip_secrets("https://github.com/a/b") == "https://github.com/a/b"
    assert strip_secrets("https://u@h.example/a/b") == "https://u@h.example/a/b"
    assert strip_secrets(f"https://u:{SECRET}@h.example/a/b") == "https://u@h.example/a/b"
    assert without_userinfo(f"x 'https://u:{SECRET}@h/a' y") == "x 'https://h/a' y"


def test_git_errors_never_carry_a_urls_userinfo(tmp_path: Path) -> None:
    # git quotes a destination as given: one that reads as a URL with userinfo comes back
    # in stderr as written, and the runner's message drops the userinfo.
    origin = tmp_path / "origin"
    run_git(["init", "-q", "--", str(origin)])
    taken = tmp_path / "https:" / f"u:{SECRET}@h.example" / "a"
    taken.mkdir(parents=True)
    (taken / "f").write_text("x")
    echoed = f"{tmp_path}/https://u:{SECRET}@h.example/a"
    with pytest.raises(GitError) as caught:
        run_git(["clone", "--", str(origin), echoed], allow_file=True, timeout_s=20)
    assert "already exists" in str(caught.value), caught.value
    assert SECRET not in str(caught.value) and "https://h.example/a" in str(caught.value)


# ------------------------------------------------------------------ the credentials file


def _write(directory: Path, name: str, text: str, mode: int = 0o600) -> None:
    path = directory / name
    path.write_text(text)
    path.chmod(mode)


def _index(directory: Path, *entries: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / gc.INDEX_FILE).write_text(json.dumps({"credentials": list(entries)}))


def test_entries_match_by_scheme_host_port_and_path_prefix(tmp_path: Path) -> None:
    _index(
        tmp_path,
        {"name": "org", "url": "https://github.com/acme/", "username": "u", "token_file": "o"},
        {
            "name": "repo",
            "url": "https://github.com/acme/app.git",
            "username": "u",
            "token_file": "r",
        },
        {"name": "ssh", "url": "git@gitlab.com:infra", "ssh_key_file": "k"},
        {"name": "port", "url": "ssh://git@git.example:2222/", "ssh_key_file": "k2"},
        {"name": "gerrit", "url": "ssh://deploy@gerrit.example:29418/p", "ssh_key_file": "k3"},
    )
    entries = gc.load(tmp_path)

    def match(source: str) -> str | None:
        found = gc.best_match(entries, source)
        return found.name if found else None

    assert match("https://github.com/acme/app") == "repo"  # the longest prefix wins
    assert match("https://GitHub.com/acme/app.git") == "repo"
    assert match("https://github.com/acme/other.git") == "org"
    assert match("https://github.com/acmeco/app.git") is None  # whole segments only
    assert match("https://github.com:8443/acme/app.git") is None  # another port
    assert match("ssh://git@github.com/acme/app.git") is None  # another scheme
    assert match("git@gitlab.com:infra/db.git") == "ssh"
    assert match("ssh://git@gitlab.com/infra/db.git") == "ssh"
    assert match("ssh://git@git.example:2222/x/y") == "port"
    assert match("ssh://git@git.example/x/y") is None
    assert match("git://github.com/acme/app") is None
    assert match("ssh://deploy@gerrit.example:29418/p/q") == "gerrit"  # ssh names its user
    assert match("/srv/acme/app") is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (
            {"name": "Bad Name", "url": "https://h.example/", "username": "u", "token_file": "t"},
            "name",
        ),
        (
            {"name": "a", "url": "https://u:p@h.example/", "username": "u", "token_file": "t"},
            "password",
        ),
        (
            {"name": "a", "url": "https://u@h.example/", "username": "u", "token_file": "t"},
            "no user name",
        ),
        ({"name": "a", "url": "ssh://git:p@h.example/", "ssh_key_file": "k"}, "password"),
        ({"name": "a", "url": "ftp://h.example/", "username": "u", "token_file": "t"}, "https"),
        ({"name": "a", "url": "https://h.example/", "token_file": "t"}, "username"),
        ({"name": "a", "url": "ssh://git@h.example/", "username": "u", "token_file": "t"}, "https"),
        ({"name": "a", "url": "https://h.example/", "ssh_key_file": "k"}, "ssh"),
        ({"name": "a", "url": "https://h.example/", "username": "u", "token_file": "../t"}, "file"),
        ({"name": "a", "url": "https://h.example/", "username": "u"}, "either"),
        (
            {
                "name": "a",
                "url": "https://h.example/",
                "username": "u",
                "token_file": "t",
                "x": "y",
            },
            "unknown",
        ),
    ],
)
def test_bad_entries_are_refused_saying_why(
    tmp_path: Path, entry: dict[str, str], says: str
) -> None:
    _index(tmp_path, entry)
    with pytest.raises(gc.CredentialError, match=says) as caught:
        gc.load(tmp_path)
    assert "u:p" not in str(caught.value)


def test_no_directory_or_no_file_means_no_credentials(tmp_path: Path) -> None:
    assert gc.load(tmp_path / "absent") == []
    assert (
        GitCredentials(tmp_path / "absent").auth_for("https://h.example/a/b").config == NO_HELPERS
    )
    assert GitCredentials(None).auth_for("https://h.example/a/b").env == {}


def test_a_token_reaches_git_through_the_helper_only(tmp_path: Path) -> None:
    _index(
        tmp_path,
        {"name": "t", "url": "https://h.example/", "username": "oauth2", "token_file": "t.token"},
    )
    _write(tmp_path, "t.token", f"{SECRET}\n")
    auth = GitCredentials(tmp_path).auth_for("https://h.example/acme/app.git")
    assert auth.config == (*NO_HELPERS, ENVIRONMENT_HELPER)
    assert SECRET not in " ".join(auth.config)  # the command line names the variables only
    assert auth.env == {USERNAME_VARIABLE: "oauth2", PASSWORD_VARIABLE: SECRET}
    # The real git asks the helper and gets the pair; `store` is not answered.
    env = {**git_environment(), **auth.env}
    config = [part for entry in auth.config for part in ("-c", entry)]
    filled = subprocess.run(
        ["git", *config, "credential", "fill"],
        input="protocol=https\nhost=h.example\npath=acme/app.git\n\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=20,
        check=True,
    )
    assert f"username=oauth2\npassword={SECRET}\n" in filled.stdout
    stored = subprocess.run(
        ["git", *config, "credential", "approve"],
        input=f"protocol=https\nhost=h.example\nusername=oauth2\npassword={SECRET}\n\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=20,
        check=True,
    )
    assert stored.stdout == ""


@pytest.mark.parametrize(
    ("mode", "refused"),
    [(0o600, False), (0o400, False), (0o640, True), (0o644, True), (0o604, True)],
)
def test_secret_files_other_users_may_read_are_refused(
    tmp_path: Path, mode: int, refused: bool
) -> None:
    _index(tmp_path, {"name": "k", "url": "ssh://git@h.example/", "ssh_key_file": "k.key"})
    _write(tmp_path, "k.key", "-----BEGIN OPENSSH PRIVATE KEY-----\n", mode)
    credentials = GitCredentials(tmp_path)
    if refused:
        with pytest.raises(FailedPrecondition, match=r"k\.key may be read by other users"):
            credentials.auth_for("ssh://git@h.example/a/b")
    else:
        assert "k.key" in credentials.auth_for("ssh://git@h.example/a/b").env["GIT_SSH_COMMAND"]


def test_a_missing_key_or_token_is_refused_by_name_without_a_path(tmp_path: Path) -> None:
    _index(
        tmp_path,
        {"name": "k", "url": "ssh://git@h.example/", "ssh_key_file": "k.key"},
        {"name": "t", "url": "https://h.example/", "username": "u", "token_file": "t.token"},
    )
    for source, name in (("git@h.example:a/b", "k.key"), ("https://h.example/a/b", "t.token")):
        with pytest.raises(FailedPrecondition) as caught:
            GitCredentials(tmp_path).auth_for(source)
        message = caught.value.message
        assert f"{name} does not exist" in message and str(tmp_path) not in message
    _write(tmp_path, "t.token", "two\nlines\n")
    with pytest.raises(FailedPrecondition, match="one token on one line"):
        GitCredentials(tmp_path).auth_for("https://h.example/a/b")


def test_the_ssh_command_uses_that_key_only_and_checks_host_keys(tmp_path: Path) -> None:
    key_dir = tmp_path / "with space"
    key_dir.mkdir()
    _index(
        key_dir,
        {"name": "k", "url": "git@h.example:", "ssh_key_file": "k.key", "known_hosts_file": "kh"},
    )
    _write(key_dir, "k.key", "key\n")
    _write(key_dir, "kh", "h.example ssh-ed25519 AAAA\n", 0o644)  # public: may be readable
    auth = GitCredentials(key_dir).auth_for("git@h.example:acme/app.git")
    assert auth.config == NO_HELPERS
    words = shlex.split(auth.env["GIT_SSH_COMMAND"])
    assert words[:5] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    assert words[words.index("-i") + 1] == str(key_dir / "k.key")
    options = {words[i + 1] for i, w in enumerate(words) if w == "-o"}
    assert {
        "IdentitiesOnly=yes",
        "IdentityAgent=none",
        "StrictHostKeyChecking=yes",
        f"UserKnownHostsFile={key_dir / 'kh'}",
    } <= options
    without = shlex.split(ssh_command(Path("/k"), None, base="ssh"))
    assert without == [
        "ssh",
        "-i",
        "/k",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "IdentityAgent=none",
        "-o",
        "StrictHostKeyChecking=yes",
    ]


def test_the_file_is_read_again_at_each_use(tmp_path: Path) -> None:
    credentials = GitCredentials(tmp_path)
    assert credentials.auth_for("https://h.example/a/b").env == {}
    _index(tmp_path, {"name": "t", "url": "https://h.example/", "username": "u", "token_file": "t"})
    _write(tmp_path, "t", "first\n")
    assert credentials.auth_for("https://h.example/a/b").env[PASSWORD_VARIABLE] == "first"
    _write(tmp_path, "t", "second\n")
    assert credentials.auth_for("https://h.example/a/b").env[PASSWORD_VARIABLE] == "second"
    (tmp_path / gc.INDEX_FILE).write_text("{not json")
    with pytest.raises(FailedPrecondition, match="not valid JSON"):
        credentials.auth_for("https://h.example/a/b")


def test_the_credentials_directory_is_never_a_source(tmp_path: Path) -> None:
    credentials = tmp_path / "etc" / "git-credentials"
    (credentials / "sub").mkdir(parents=True)
    settings = IndexSettings(1, 1, 1, 1.0, 64, 1, 1, 1, credentials_dir=credentials)
    policy = LocalPolicy("any", tmp_path / "data", protected=settings.protected_dirs)
    link = tmp_path / "innocent"
    link.symlink_to(credentials)
    for raw in (credentials, credentials / "sub", tmp_path / "etc", link):
        with pytest.raises(PermissionDenied, match="credentials directory"):
            policy.check_directory(raw, admin=True)
    (tmp_path / "src").mkdir()
    assert policy.check_directory(tmp_path / "src", admin=False) == tmp_path / "src"


# ------------------------------------------------------------------ cograph credentials


def test_the_cli_adds_lists_and_removes_without_printing_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "creds"
    token = tmp_path / "token.txt"
    token.write_text(f"{SECRET}\n")
    key = tmp_path / "id_deploy"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    base = ["credentials", "--dir", str(directory)]
    assert cograph([*base, "add", "gh", "https://github.com/acme/", "--username",
                    "x-access-token", "--token-file", str(token)]) == 0  # fmt: skip
    assert cograph([*base, "add", "gl", "git@gitlab.com:infra/", "--ssh-key", str(key)]) == 0
    # A name taken, a token without a user name, a URL with a password: refused.
    assert cograph([*base, "add", "gh", "https://github.com/x/", "--username", "u",
                    "--token-file", str(token)]) == 2  # fmt: skip
    assert cograph([*base, "add", "x", "https://h.example/", "--token-file", str(token)]) == 2
    assert cograph([*base, "add", "y", f"https://u:{SECRET}@h.example/", "--username", "u",
                    "--token-file", str(token)]) == 2  # fmt: skip
    capsys.readouterr()
    assert cograph([*base, "list", "--json"]) == 0
    listed = capsys.readouterr()
    assert SECRET not in listed.out + listed.err
    assert [(e["name"], e["kind"]) for e in json.loads(listed.out)] == [
        ("gh", "token"),
        ("gl", "ssh"),
    ]
    assert os.stat(directory).st_mode & 0o777 == 0o700
    for name in ("credentials.json", "gh.token", "gl.key"):
        assert (directory / name).stat().st_mode & 0o777 == 0o600, name
    # What the CLI wrote is what the service uses.
    auth = GitCredentials(directory).auth_for("https://github.com/acme/app.git")
    assert auth.env[PASSWORD_VARIABLE] == SECRET
    monkeypatch.setattr("sys.stdin", _Stdin(b"rotated\n"))
    assert cograph([*base, "add", "gh", "https://github.com/acme/", "--username",
                    "x-access-token", "--token-stdin", "--replace"]) == 0  # fmt: skip
    assert (
        GitCredentials(directory).auth_for("https://github.com/acme/a").env[PASSWORD_VARIABLE]
        == "rotated"
    )
    assert cograph([*base, "remove", "gh"]) == 0
    assert not (directory / "gh.token").exists()
    assert [e.name for e in gc.load(directory)] == ["gl"]
    assert cograph([*base, "remove", "gh"]) == 1


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = _Buffer(data)


class _Buffer:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, size: int = -1) -> bytes:
        return self._data[:size] if size >= 0 else self._data

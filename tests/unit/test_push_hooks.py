"""Push webhooks without a network: which repository a URL names (cograph_api.push_hooks),
the vendors' signature and token checks and payloads (gateway.hooks), the webhook secrets'
settings, and the identity the gateway calls SyncSource as."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from cograph_api import limits
from cograph_api.push_hooks import (
    SYNC_KEYS_MAX,
    WEBHOOK_PRINCIPAL,
    is_repository_key,
    repository_key,
)
from gateway.hooks import (
    GITHUB,
    GITLAB,
    Malformed,
    check_github,
    check_gitlab,
    github_signature,
    read_payload,
    read_push,
)
from gateway.quotas import RateLimited, Work
from gateway.settings import WEBHOOK_SECRET_MIN_BYTES, GatewaySettings
from svckit.config import ConfigError, Env
from tests.internal_auth import with_secret

SECRET = b"a-webhook-secret-of-at-least-32-bytes-0123456789"
COMMIT = "9f3c2b1a" * 5

# ---- which repository a URL names -------------------------------------------------------

BILLING = "github.com/acme/billing"


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/billing",
        "https://github.com/acme/billing.git",
        "https://github.com/acme/billing/",
        "https://github.com/acme/billing.git/",
        "https://GitHub.COM/Acme/Billing.git",
        "https://github.com./acme/billing",
        "http://github.com/acme/billing",
        "https://deploy@github.com/acme/billing",
        "https://github.com:443/acme/billing",
        "git@github.com:acme/billing.git",
        "git@github.com:/acme/billing.git",
        "github.com:acme/billing",
        "ssh://git@github.com/acme/billing.git",
        "ssh://git@github.com:22/acme/billing",
        "git://github.com/acme/billing.git",
        "  https://github.com/acme/billing  ",
    ],
)
def test_every_form_of_one_repository_has_one_key(url: str) -> None:
    assert repository_key(url) == BILLING


@pytest.mark.parametrize(
    "url",
    [
        # Names that contain the indexed one, or that it contains: never a match.
        "https://github.com/acme/billing-old",
        "https://github.com/acme/billing/tree/main",
        "https://github.com/acme/billingx.git",
        "https://github.com/acme",
        "https://github.com/notacme/billing",
        "https://github.com/x/acme/billing",
        "https://evil.example/github.com/acme/billing",
        "https://github.com.evil.example/acme/billing",
        "https://evil.example/acme/billing",
        # The user name is not the host.
        "https://github.com@evil.example/acme/billing",
        "git@evil.example:github.com/acme/billing.git",
    ],
)
def test_other_repositories_have_other_keys(url: str) -> None:
    key = repository_key(url)
    assert key != BILLING
    assert key is None or is_repository_key(key)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "https://github.com/",
        "https://github.com",
        "https://github.com/acme/billing?ref=main",
        "https://github.com/acme/billing#main",
        "https://github.com/acme/../billing",
        "https://github.com/acme/./billing",
        "https://github.com/acme//billing",
        "https://github.com\\@evil.example/acme/billing",
        "https://a@b@github.com/acme/billing",
        "https://[::1]/acme/billing",
        "https://github.com:99999/acme/billing",
        "https://gíthub.com/acme/billing",
        "https://github.com/acme/bil ling",
        "https://github.com/acme/bill\ning",
        "ftp://github.com/acme/billing",
        "ext::sh -c touch% /tmp/x",
        "fd::0",
        "acme/billing",
        "./billing",
        "~/src/billing",
        "file://host.example/srv/billing",
        "file:///srv/../etc",
        "/srv/./billing",
        "x" * 3000,
    ],
)
def test_what_parsers_could_read_two_ways_names_nothing(url: str) -> None:
    assert repository_key(url) is None


def test_server_paths_and_file_urls_meet_exactly() -> None:
    assert repository_key("/srv/git/billing") == "file:///srv/git/billing"
    assert repository_key("file:///srv/git/billing") == "file:///srv/git/billing"
    assert repository_key("file://localhost/srv/git/billing/") == "file:///srv/git/billing"
    # Paths keep their case and their .git: two directories, two repositories.
    assert repository_key("/srv/git/Billing") != repository_key("/srv/git/billing")
    assert repository_key("/srv/git/billing.git") != repository_key("/srv/git/billing")
    spaced = repository_key("/srv/my repos/billing")
    assert spaced == "file:///srv/my%20repos/billing"
    assert repository_key("file:///srv/my%20repos/billing") == spaced
    # A literal percent sign in a directory's name is not an escape.
    assert repository_key("/srv/100%20/billing") != spaced


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/billing",
        "git@gitlab.example.com:group/sub/project.git",
        "ssh://git@gitlab.example.com:2222/group/project.git",
        "https://host.example/a:b/c@d/e%2Ff",
        "/srv/my repos/billing",
        "/srv/100%/billing",
        "/srv/ünïcode/billing",
    ],
)
def test_keys_are_what_sync_source_accepts(url: str) -> None:
    key = repository_key(url)
    assert key is not None and is_repository_key(key)
    assert repository_key(key if key.startswith("file://") else "https://" + key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        "https://github.com/acme/billing",
        "git@github.com:acme/billing",
        "github.com:22/acme/billing",
        "user@github.com/acme/billing",
        "GitHub.com/acme/billing",
        "github.com/Acme/billing",
        "github.com/acme/billing.git",
        "github.com/acme/billing/",
        "github.com",
        "file:///srv/my repos/billing",
        "file://host/srv/billing",
        "/srv/billing",
    ],
)
def test_sync_source_refuses_what_is_not_a_key(key: str) -> None:
    assert not is_repository_key(key)


def test_the_webhook_identity_is_no_key_principal() -> None:
    assert not re.match(limits.KEY_NAME_PATTERN, WEBHOOK_PRINCIPAL)
    assert max(len(GITHUB.url_fields), len(GITLAB.url_fields)) <= SYNC_KEYS_MAX


# ---- GitHub's signature and GitLab's token ---------------------------------------------


def test_github_signature_matches_githubs_own_example() -> None:
    # docs.github.com, "Validating webhook deliveries": "Testing the webhook payload
    # validation".
    assert github_signature(b"It's a Secret to Everybody", b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def test_github_deliveries_are_checked_against_the_raw_body() -> None:
    body = b'{"ref": "refs/heads/main"}'
    good = github_signature(SECRET, body)
    assert check_github(SECRET, {"x-hub-signature-256": good}, body) is None
    assert check_github(SECRET, {"x-hub-signature-256": f" {good} "}, body) is None
    missing = check_github(SECRET, {}, body)
    assert missing is not None and "missing X-Hub-Signature-256" in missing
    refusals = [
        github_signature(SECRET, body + b" "),  # another body (even re-serialised)
        github_signature(SECRET[:-1], body),  # another secret
        good.upper(),
        good.removeprefix("sha256="),
        "sha1=" + good.removeprefix("sha256="),
        good[:-1],
        good + "0",
        "sha256=",
        "",
        "sha256=ÿ" + good[8:],
    ]
    for given in refusals:
        why = check_github(SECRET, {"x-hub-signature-256": given}, body)
        assert why is not None and "not the HMAC-SHA256" in why, given
    # The older SHA-1 header alone does not do.
    assert check_github(SECRET, {"x-hub-signature": "sha1=00"}, body) is not None


def test_github_refusals_never_quote_the_secret_or_a_signature() -> None:
    body = b"{}"
    given = github_signature(b"another-secret-of-at-least-32-bytes-000000", body)
    why = check_github(SECRET, {"x-hub-signature-256": given}, body)
    assert why is not None
    assert SECRET.decode() not in why and given[7:] not in why
    assert github_signature(SECRET, body)[7:] not in why


def test_gitlab_deliveries_carry_the_token_itself() -> None:
    token = SECRET.decode()
    assert check_gitlab(SECRET, {"x-gitlab-token": token}, b"{}") is None
    assert check_gitlab(SECRET, {"x-gitlab-token": token + "\n"}, b"{}") is None
    missing = check_gitlab(SECRET, {}, b"{}")
    assert missing is not None and "missing X-Gitlab-Token" in missing
    for given in (token[:-1], token + "x", token.upper(), "", "ä" + token):
        why = check_gitlab(SECRET, {"x-gitlab-token": given}, b"{}")
        assert why is not None and token not in why


# ---- payloads ------------------------------------------------------------------------------


def _github_push(**changes: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": COMMIT,
        "created": False,
        "deleted": False,
        "repository": {
            "full_name": "acme/billing",
            "clone_url": "https://github.com/acme/billing.git",
            "ssh_url": "git@github.com:acme/billing.git",
            "html_url": "https://github.com/acme/billing",
            "git_url": "git://github.com/acme/billing.git",
        },
        "commits": [],
    }
    payload.update(changes)
    return payload


def _gitlab_push(**changes: object) -> dict[str, object]:
    payload: dict[str, object] = {
        "object_kind": "push",
        "event_name": "push",
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": COMMIT,
        "checkout_sha": COMMIT,
        "project": {
            "path_with_namespace": "group/sub/project",
            "git_http_url": "https://gitlab.example.com/group/sub/project.git",
            "git_ssh_url": "git@gitlab.example.com:group/sub/project.git",
            "web_url": "https://gitlab.example.com/group/sub/project",
        },
    }
    payload.update(changes)
    return payload


def test_a_github_push_names_its_repository_branch_and_commit() -> None:
    body = json.dumps(_github_push()).encode()
    push = read_push(GITHUB, read_payload(GITHUB, body, "application/json"))
    assert push.keys == (BILLING,)
    assert push.branch == "main" and push.commit == COMMIT and not push.deleted
    assert push.name == "acme/billing"


def test_a_github_form_delivery_holds_the_json_in_payload() -> None:
    body = ("payload=" + quote(json.dumps(_github_push()), safe="")).encode()
    data = read_payload(GITHUB, body, "application/x-www-form-urlencoded")
    assert read_push(GITHUB, data).keys == (BILLING,)
    for bad in (b"payload=%7B&payload=%7D", b"other=1", b"payload=%FF", b"payload=%7B"):
        with pytest.raises(Malformed):
            read_payload(GITHUB, bad, "application/x-www-form-urlencoded")
    # GitLab sends JSON only: a form is not JSON.
    with pytest.raises(Malformed, match="not JSON"):
        read_payload(GITLAB, body, "application/x-www-form-urlencoded")


def test_a_gitlab_push_names_its_project() -> None:
    body = json.dumps(_gitlab_push()).encode()
    push = read_push(GITLAB, read_payload(GITLAB, body, "application/json"))
    assert push.keys == ("gitlab.example.com/group/sub/project",)
    assert push.branch == "main" and push.name == "group/sub/project"


def test_branch_names_with_slashes_tags_and_deletions() -> None:
    push = read_push(GITHUB, _github_push(ref="refs/heads/release/2.0"))
    assert push.branch == "release/2.0"
    assert read_push(GITHUB, _github_push(ref="refs/tags/v1")).branch is None
    assert read_push(GITHUB, _github_push(ref="refs/heads/")).branch is None
    assert read_push(GITHUB, _github_push(ref="main")).branch is None
    assert read_push(GITHUB, _github_push(after="0" * 40, deleted=True)).deleted
    assert read_push(GITLAB, _gitlab_push(after="0" * 40)).deleted
    sha256 = "ab" * 32
    assert read_push(GITLAB, _gitlab_push(after=sha256.upper())).commit == sha256


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ref": None}, "ref: missing"),
        ({"ref": 7}, "ref: missing"),
        ({"after": None}, "after: missing"),
        ({"after": "main"}, "after: not a commit id"),
        ({"after": "g" * 40}, "after: not a commit id"),
        ({"repository": None}, "repository: missing"),
        ({"repository": ["https://github.com/acme/billing"]}, "repository: missing"),
        ({"repository": {"clone_url": 5}}, "repository.clone_url: not a string"),
        ({"repository": {"full_name": "acme/billing"}}, "no repository URL"),
        ({"repository": {"clone_url": "https://github.com/"}}, "no repository URL"),
    ],
)
def test_pushes_missing_what_the_hook_needs_are_malformed(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(Malformed, match=message):
        read_push(GITHUB, _github_push(**changes))


def test_bodies_that_are_not_json_objects_are_malformed() -> None:
    for body in (b"", b"not json", b"[1, 2]", b'"push"', b"\xff\xfe", b"[" * 100_000):
        with pytest.raises(Malformed):
            read_payload(GITHUB, body, "application/json")


def test_another_events_payload_is_not_a_push() -> None:
    # A validly signed `issues` delivery replayed with X-GitHub-Event: push.
    issues = {
        "action": "opened",
        "issue": {"number": 1},
        "repository": _github_push()["repository"],
    }
    with pytest.raises(Malformed, match="ref: missing"):
        read_push(GITHUB, issues)
    # A `create` event names a ref, but no `after`.
    with pytest.raises(Malformed, match="after: missing"):
        read_push(GITHUB, {**issues, "ref": "main", "ref_type": "branch"})


# ---- settings --------------------------------------------------------------------------------


def _settings(**environ: str) -> GatewaySettings:
    return GatewaySettings.from_env(
        Env(with_secret({"COGRAPH_DATABASE_URL": "postgresql://x/y", **environ}))
    )


def test_webhooks_are_off_unless_a_secret_is_set(tmp_path: Path) -> None:
    off = _settings()
    assert off.github_webhook_secret is None and off.gitlab_webhook_secret is None
    on = _settings(GATEWAY_GITHUB_WEBHOOK_SECRET=f" {SECRET.decode()} ")
    assert on.github_webhook_secret == SECRET and on.gitlab_webhook_secret is None
    path = tmp_path / "gitlab.secret"
    path.write_bytes(SECRET + b"\n")
    from_file = _settings(GATEWAY_GITLAB_WEBHOOK_SECRET_FILE=str(path))
    assert from_file.gitlab_webhook_secret == SECRET
    # Never shown with the settings.
    assert SECRET.decode() not in repr(on) and SECRET.decode() not in repr(from_file)


def test_webhook_secrets_are_checked_at_start(tmp_path: Path) -> None:
    short = "x" * (WEBHOOK_SECRET_MIN_BYTES - 1)
    with pytest.raises(ConfigError, match=r"GATEWAY_GITHUB_WEBHOOK_SECRET: .* at least 32 bytes"):
        _settings(GATEWAY_GITHUB_WEBHOOK_SECRET=short)
    path = tmp_path / "short"
    path.write_text(short + "\n")
    with pytest.raises(ConfigError, match="GATEWAY_GITLAB_WEBHOOK_SECRET_FILE"):
        _settings(GATEWAY_GITLAB_WEBHOOK_SECRET_FILE=str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        _settings(GATEWAY_GITLAB_WEBHOOK_SECRET_FILE=str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="both set"):
        _settings(
            GATEWAY_GITHUB_WEBHOOK_SECRET=SECRET.decode(),
            GATEWAY_GITHUB_WEBHOOK_SECRET_FILE=str(path),
        )
    try:
        _settings(GATEWAY_GITHUB_WEBHOOK_SECRET=short)
    except ConfigError as err:
        assert short not in str(err)


def test_a_refused_delivery_is_told_of_the_webhooks_allowance() -> None:
    refused = RateLimited(Work.HOOKS, 3, "more than 1 a second")
    assert "to this webhook" in refused.detail and "key" not in refused.detail
    assert "with this key" in RateLimited(Work.SEARCH, 3, "x").detail

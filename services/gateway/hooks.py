"""Push webhooks from GitHub and GitLab: whether a delivery is authentic, and which push it
reports. Pure functions over the headers and the raw body, for gateway.routes_hooks and
the unit tests.

- GitHub signs every delivery with the webhook's secret: `X-Hub-Signature-256` is `sha256=`
  and the hex HMAC-SHA256 of the raw body, keyed with the secret (the older SHA-1
  `X-Hub-Signature` is not accepted). The event is `X-GitHub-Event` (`push`; `ping` when
  the webhook is created), the delivery `X-GitHub-Delivery`. The body is the JSON payload,
  or, when the webhook's content type is `application/x-www-form-urlencoded`, a form whose
  one `payload` field holds it; the signature covers the body as sent, either way.
- GitLab sends the secret token itself in `X-Gitlab-Token`: anyone who sees one delivery
  has it, so the hook belongs behind HTTPS. The event is `X-Gitlab-Event` (`Push Hook`),
  the delivery `X-Gitlab-Event-UUID`.

Both are compared in constant time (hmac.compare_digest; GitLab's token through SHA-256
digests, so not even its length shows). A push names the branch in `ref`
(`refs/heads/<branch>`), the commit the branch points to after it in `after` (all zeros:
the branch was deleted) and its repository by several URLs, each reduced to a repository
key (cograph_api.push_hooks.repository_key).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from cograph_api.push_hooks import repository_key

BRANCH_PREFIX = "refs/heads/"
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# Names shown in logs and answers are cut to this many characters.
_SHOWN_CHARS = 200

Headers = Mapping[str, str]


class Malformed(Exception):
    """An authentic delivery whose payload is not a push the hook can read (400)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def github_signature(secret: bytes, body: bytes) -> str:
    """`X-Hub-Signature-256` for `body` under `secret`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def _header_bytes(value: str) -> bytes:
    # HTTP header values arrive decoded as latin-1; this gives back the bytes sent.
    return value.strip().encode("latin-1", "replace")


def check_github(secret: bytes, headers: Headers, body: bytes) -> str | None:
    """None when the delivery is signed with `secret`, else why not (never the values)."""
    given = headers.get("x-hub-signature-256")
    if given is None:
        return "missing X-Hub-Signature-256 header (give the webhook a secret)"
    expected = github_signature(secret, body).encode()
    if not hmac.compare_digest(expected, _header_bytes(given)):
        return (
            "X-Hub-Signature-256 is not the HMAC-SHA256 of this body under the configured "
            "secret (sha256=<hex>)"
        )
    return None


def check_gitlab(secret: bytes, headers: Headers, body: bytes) -> str | None:
    """None when the delivery carries the secret token `secret`, else why not."""
    given = headers.get("x-gitlab-token")
    if given is None:
        return "missing X-Gitlab-Token header (give the webhook a secret token)"
    same = hmac.compare_digest(
        hashlib.sha256(_header_bytes(given)).digest(), hashlib.sha256(secret).digest()
    )
    if not same:
        return "X-Gitlab-Token is not the configured secret token"
    return None


@dataclass(frozen=True)
class Vendor:
    """One vendor's webhook: its route, headers, events and payload fields."""

    name: str  # the route's last segment: /api/hooks/<name>
    title: str
    check: Callable[[bytes, Headers, bytes], str | None]
    event_header: str  # as sent, for messages; looked up case-insensitively
    delivery_header: str
    push_events: frozenset[str]
    ping_events: frozenset[str]
    container: str  # the payload's object naming the repository
    url_fields: tuple[str, ...]  # its URLs, each a form of the repository's address
    name_field: str  # its name, for the log
    form_body: bool  # may send the JSON as the form field `payload`


GITHUB = Vendor(
    name="github",
    title="GitHub",
    check=check_github,
    event_header="X-GitHub-Event",
    delivery_header="X-GitHub-Delivery",
    push_events=frozenset({"push"}),
    ping_events=frozenset({"ping"}),
    container="repository",
    url_fields=("clone_url", "ssh_url", "html_url"),
    name_field="full_name",
    form_body=True,
)
GITLAB = Vendor(
    name="gitlab",
    title="GitLab",
    check=check_gitlab,
    event_header="X-Gitlab-Event",
    delivery_header="X-Gitlab-Event-UUID",
    push_events=frozenset({"Push Hook"}),
    ping_events=frozenset(),
    container="project",
    url_fields=("git_http_url", "git_ssh_url", "web_url"),
    name_field="path_with_namespace",
    form_body=False,
)
VENDORS = (GITHUB, GITLAB)


@dataclass(frozen=True)
class Push:
    """What a push event reports."""

    keys: tuple[str, ...]  # the repository's keys, one per distinct URL form
    ref: str
    commit: str  # `after`, lower case
    deleted: bool  # the ref was deleted: nothing to index
    name: str  # the repository's name as the vendor gives it, for the log

    @property
    def branch(self) -> str | None:
        """The branch pushed to, or None when the ref is not a branch (a tag)."""
        if self.ref.startswith(BRANCH_PREFIX) and len(self.ref) > len(BRANCH_PREFIX):
            return self.ref[len(BRANCH_PREFIX) :]
        return None


def read_payload(vendor: Vendor, body: bytes, content_type: str) -> dict[str, Any]:
    """The delivery's JSON object; Malformed when the body holds none."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if vendor.form_body and kind == "application/x-www-form-urlencoded":
        try:
            fields = parse_qsl(
                body.decode("ascii"),
                keep_blank_values=True,
                strict_parsing=True,
                errors="strict",
                max_num_fields=16,
            )
        except (UnicodeDecodeError, ValueError):
            raise Malformed("body: not a form (application/x-www-form-urlencoded)") from None
        payloads = [value for name, value in fields if name == "payload"]
        if len(payloads) != 1:
            raise Malformed("body: a form delivery holds its JSON in one `payload` field")
        text = payloads[0]
    else:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed("body: not UTF-8") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise Malformed("body: not JSON") from None
    if not isinstance(data, dict):
        raise Malformed("body: not a JSON object")
    return data


def _text(data: Mapping[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Malformed(f"{where}{name}: missing, or not a string (not a push event's payload?)")
    return value.strip()


def read_push(vendor: Vendor, data: Mapping[str, Any]) -> Push:
    """The push `data` reports; Malformed when a field it needs is missing or wrong."""
    ref = _text(data, "ref", "")
    commit = _text(data, "after", "").lower()
    if not _COMMIT.match(commit):
        raise Malformed("after: not a commit id (40 or 64 hexadecimal digits)")
    container = data.get(vendor.container)
    if not isinstance(container, dict):
        raise Malformed(f"{vendor.container}: missing, or not an object")
    keys: list[str] = []
    for field in vendor.url_fields:
        value = container.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise Malformed(f"{vendor.container}.{field}: not a string")
        key = repository_key(value)
        if key is not None and key not in keys:
            keys.append(key)
    if not keys:
        fields = ", ".join(f"{vendor.container}.{f}" for f in vendor.url_fields)
        raise Malformed(f"no repository URL in the payload ({fields})")
    name = container.get(vendor.name_field)
    deleted = set(commit) == {"0"} or data.get("deleted") is True
    return Push(
        tuple(keys),
        ref,
        commit,
        deleted,
        name[:_SHOWN_CHARS] if isinstance(name, str) else "",
    )

"""Who may index a path on the server: RETRIEVAL_LOCAL_SOURCES."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.servicer import _require_admin_for_server_paths
from retrieval.settings import IndexSettings
from svckit import requestctx
from svckit.config import ConfigError, Env
from svckit.errors import PermissionDenied


@pytest.fixture(autouse=True)
def _no_leaked_principal() -> Iterator[None]:
    token = requestctx.set_principal(None)
    yield
    requestctx.reset_principal(token)


def _as(principal: requestctx.Principal | None) -> None:
    requestctx.set_principal(principal)


@pytest.mark.parametrize("source", ["/srv/checkouts/billing", "file:///etc", "./relative"])
def test_admin_policy_refuses_server_paths_to_agents(source: str) -> None:
    _as(requestctx.Principal("agent-7", admin=False))
    with pytest.raises(PermissionDenied, match="needs an admin key"):
        _require_admin_for_server_paths(source, "admin")
    _as(requestctx.Principal("ops", admin=True))
    _require_admin_for_server_paths(source, "admin")


@pytest.mark.parametrize(
    "source", ["https://github.com/acme/billing.git", "git@github.com:acme/billing.git"]
)
def test_remote_urls_are_open_to_agents(source: str) -> None:
    _as(requestctx.Principal("agent-7", admin=False))
    _require_admin_for_server_paths(source, "admin")


def test_any_policy_is_the_local_default() -> None:
    _as(requestctx.Principal("agent-7", admin=False))
    _require_admin_for_server_paths("/srv/checkouts/billing", "any")
    assert IndexSettings.from_env(Env({})).local_sources == "any"
    assert (
        IndexSettings.from_env(Env({"RETRIEVAL_LOCAL_SOURCES": "admin"})).local_sources == "admin"
    )
    with pytest.raises(ConfigError, match="RETRIEVAL_LOCAL_SOURCES"):
        IndexSettings.from_env(Env({"RETRIEVAL_LOCAL_SOURCES": "nobody"}))

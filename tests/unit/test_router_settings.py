"""Router settings and request validation."""

from __future__ import annotations

import pytest

from router.cache import CacheLimits
from router.routing import validate
from router.settings import RouterSettings
from svckit.config import ConfigError, Env
from svckit.errors import InvalidArgument
from tests.internal_auth import with_secret


def test_defaults_and_database_url_fallback() -> None:
    settings = RouterSettings.from_env(
        Env(with_secret({"COGRAPH_DATABASE_URL": "postgresql://shared/db"}))
    )
    assert settings.address == "127.0.0.1:50053"
    assert settings.database_url == "postgresql://shared/db"
    assert (settings.limits.default_repositories, settings.limits.default_collections) == (3, 3)
    assert settings.limits.max_results == 20
    own = RouterSettings.from_env(
        Env(
            with_secret(
                {"COGRAPH_DATABASE_URL": "postgresql://shared/db", "ROUTER_DATABASE_URL": "pg://ro"}
            )
        )
    )
    assert own.database_url == "pg://ro"


def test_a_database_url_is_required() -> None:
    with pytest.raises(ConfigError, match="ROUTER_DATABASE_URL"):
        RouterSettings.from_env(Env({}))


def test_out_of_range_defaults_fail_fast() -> None:
    with pytest.raises(ConfigError, match="ROUTER_DEFAULT_REPOSITORIES"):
        RouterSettings.from_env(
            Env(with_secret({"COGRAPH_DATABASE_URL": "x", "ROUTER_DEFAULT_REPOSITORIES": "21"}))
        )


def test_validation_edges() -> None:
    limits = RouterSettings.from_env(Env(with_secret({"COGRAPH_DATABASE_URL": "x"}))).limits
    request = validate(limits, "billing", None, None)
    assert (request.max_repositories, request.max_collections) == (3, 3)
    assert validate(limits, "b" * 1000, 1, 20).max_collections == 20
    for args in (("b" * 1001, None, None), (" ", None, None), ("b", 0, None), ("b", None, 21)):
        with pytest.raises(InvalidArgument):
            validate(limits, *args)


def test_cache_limits_and_switching_the_cache_off() -> None:
    def cache(**extra: str) -> CacheLimits | None:
        env = {"COGRAPH_DATABASE_URL": "x", **extra}
        return RouterSettings.from_env(Env(with_secret(env))).cache

    assert cache() == CacheLimits(terms=1024, viewers=256)
    assert cache(ROUTER_CACHE_TERMS="10", ROUTER_CACHE_VIEWERS="2") == CacheLimits(10, 2)
    assert cache(ROUTER_CACHE_TERMS="0") is None  # every route goes to SQL (RouterStore)
    with pytest.raises(ConfigError, match="ROUTER_CACHE_VIEWERS"):
        cache(ROUTER_CACHE_VIEWERS="0")

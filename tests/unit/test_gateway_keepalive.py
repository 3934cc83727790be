"""GATEWAY_KEEPALIVE_S: how long the gateway keeps an idle client connection, which must
outlast the proxy's own keep-alive (tests/unit/test_deploy_manifests.py checks the Ingress
against it); its bounds, and that uvicorn gets it."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from gateway.app import server_config
from gateway.settings import KEEPALIVE_DEFAULT_S, KEEPALIVE_MAX_S, GatewaySettings
from svckit.config import ConfigError, Env
from tests.internal_auth import with_secret


def _settings(**environ: str) -> GatewaySettings:
    return GatewaySettings.from_env(
        Env(with_secret({"COGRAPH_DATABASE_URL": "postgresql://x/y", **environ}))
    )


def test_the_default_outlasts_uvicorns_and_ingress_nginxs_keepalive() -> None:
    # uvicorn closes after 5 s by default, ingress-nginx reuses upstream connections for 60 s.
    assert KEEPALIVE_DEFAULT_S > 60
    assert _settings().keepalive_s == KEEPALIVE_DEFAULT_S
    assert _settings(GATEWAY_KEEPALIVE_S="").keepalive_s == KEEPALIVE_DEFAULT_S


@pytest.mark.parametrize("value", ["1", "90", str(KEEPALIVE_MAX_S), " 120 "])
def test_values_within_the_bounds_are_taken(value: str) -> None:
    assert _settings(GATEWAY_KEEPALIVE_S=value).keepalive_s == int(value)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0", "must be >= 1"),
        ("-5", "must be >= 1"),
        (str(KEEPALIVE_MAX_S + 1), f"must be <= {KEEPALIVE_MAX_S}"),
        ("75.5", "must be an integer"),
        ("75s", "must be an integer"),
        ("forever", "must be an integer"),
    ],
)
def test_values_outside_the_bounds_stop_the_start_naming_the_variable(value: str, why: str) -> None:
    with pytest.raises(ConfigError) as error:
        _settings(GATEWAY_KEEPALIVE_S=value)
    assert "GATEWAY_KEEPALIVE_S" in str(error.value) and why in str(error.value)


def test_uvicorn_keeps_idle_connections_for_the_setting() -> None:
    config = server_config(FastAPI(), _settings(GATEWAY_KEEPALIVE_S="90"))
    assert config.timeout_keep_alive == 90
    assert server_config(FastAPI(), _settings()).timeout_keep_alive == KEEPALIVE_DEFAULT_S

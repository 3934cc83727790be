"""The OpenAPI document describes what the gateway answers: every success a typed model with
field descriptions and an example that the model accepts, every error the error body with
a status the gateway really answers, no 422 (validation errors are 400), and the API's
documentation pages load nothing from another origin."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter
from starlette.testclient import TestClient

from gateway.app import build_app
from gateway.errors import _GRPC_TO_HTTP, _HTTP_CODES
from gateway.openapi_document import ASSETS
from gateway.settings import GatewaySettings
from svckit.config import Env
from tests.integration.support.contract import api_routes
from tests.internal_auth import with_secret

# What the gateway's error handlers answer (gateway.errors), and 507 for a full disk.
ANSWERED = {status for status, _ in _GRPC_TO_HTTP.values()} | set(_HTTP_CODES) | {507}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    settings = GatewaySettings.from_env(
        Env(with_secret({"COGRAPH_DATABASE_URL": "postgresql://unused/unused"}))
    )
    # Building the document touches no backend, database or key: none is given.
    return build_app(settings, cast(Any, None), cast(Any, None), cast(Any, None))


@pytest.fixture(scope="module")
def document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_every_rest_route_is_documented(document: dict[str, Any]) -> None:
    paths = set(document["paths"])
    for expected in ("/api/search", "/api/repositories/{slug}", "/v1/posts", "/api/keys"):
        assert expected in paths
    assert len(_operations(document)) >= 40


def test_every_success_is_typed_with_an_example(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        assert successes, (method, path)
        for status, response in successes.items():
            if status == "204":
                assert "content" not in response, (method, path)
                continue
            media = response["content"]["application/json"]
            schema = media["schema"]
            refs = [schema.get("$ref")] + [s.get("$ref") for s in schema.get("anyOf", [])]
            assert any(refs), (method, path, schema)
            assert "example" in media or media.get("examples"), (method, path)


def test_no_422_and_every_error_is_the_error_body(document: dict[str, Any]) -> None:
    text = json.dumps(document)
    assert "HTTPValidationError" not in text and '"422"' not in text
    for method, path, operation in _operations(document):
        errors = {int(s): r for s, r in operation["responses"].items() if s[0] in "45"}
        if path not in ("/healthz", "/readyz"):
            # Every route can answer these (gateway.responses.ALWAYS).
            assert {400, 401, 413, 429, 503} <= set(errors), (method, path)
        for status, response in errors.items():
            assert status in ANSWERED, (method, path, status)
            media = response["content"]["application/json"]
            expected = "Readiness" if path == "/readyz" else "ErrorBody"
            assert media["schema"]["$ref"].endswith(f"/{expected}"), (method, path, status)
            assert "example" in media, (method, path, status)
        if 429 in errors:
            assert "Retry-After" in errors[429]["headers"]


def test_examples_are_what_the_models_describe(app: FastAPI) -> None:
    checked = 0
    for route in (r for r in api_routes(app.routes) if r.include_in_schema):
        for response in route.responses.values():
            model = response.get("model")
            if model is None:
                continue
            media = response["content"]["application/json"]
            examples = (
                [media["example"]]
                if "example" in media
                else [e["value"] for e in media["examples"].values()]
            )
            for example in examples:
                TypeAdapter(model).validate_json(json.dumps(example), strict=True)
                checked += 1
            assert route.response_model is None, route.path  # documented, not re-serialised
    assert checked >= 35


def _response_schemas(document: dict[str, Any]) -> set[str]:
    """The component schemas that success answers use, transitively."""
    schemas = document["components"]["schemas"]
    seen: set[str] = set()
    todo: list[Any] = [
        response.get("content", {})
        for _, _, operation in _operations(document)
        for status, response in operation["responses"].items()
        if status.startswith("2")
    ]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    seen.add(name)
                    todo.append(schemas[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return seen


def test_every_answer_field_is_described(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    names = _response_schemas(document)
    assert {"Repository", "CompactSearchAnswer", "SearchResponse", "Post", "Key"} <= names
    for name in names:
        schema = schemas[name]
        assert schema.get("description"), name
        for field, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field} has no description"


def test_docs_pages_need_no_key_and_no_cdn(app: FastAPI) -> None:
    client = TestClient(app)
    for page in ("/docs", "/redoc"):
        reply = client.get(page)
        assert reply.status_code == 200, (page, reply.text)
        assert "/openapi.json" in reply.text
        assert "cdn." not in reply.text and "fonts.googleapis" not in reply.text
        assert f"{ASSETS}/" in reply.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        reply = client.get(f"{ASSETS}/{asset}")
        assert reply.status_code == 200 and len(reply.content) > 10_000, asset
    assert client.get(f"{ASSETS}/nothing.js").status_code == 404
    assert client.get("/openapi.json").status_code == 200

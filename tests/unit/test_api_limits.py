"""The published limits (the gateway's OpenAPI schema and the MCP tool schemas) against what
each service actually enforces.

For every bounded field the schema's maxLength / maxItems / minimum / maximum is read from
the schema the gateway serves, then the service's own validation is called just inside and
just outside that bound: the inside value must pass and the outside one must be refused. A
limit changed on one side only fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from fastapi import FastAPI
from pydantic import TypeAdapter

from cograph_api import limits, mcp_args, mcp_tools
from cograph_api import rest_models as models
from commons.listing import validate_list_page
from commons.profiles import validate_display_name
from commons.settings import CommonsSettings
from commons.validation import (
    validate_comment,
    validate_log_page,
    validate_post,
    validate_query,
    validate_reason,
)
from gateway.api import GatewayApi
from gateway.backends import Backends
from gateway.keys_store import KeysStore
from gateway.routes_commons import commons_router
from gateway.routes_keys import keys_router
from gateway.routes_retrieval import retrieval_router
from gateway.settings import GatewaySettings
from retrieval.search.query import build_query
from retrieval.search.search_settings import SearchSettings
from router.routing import validate as validate_route
from router.settings import RouterSettings
from svckit.config import Env
from svckit.errors import InvalidArgument
from tests.unit.test_mcp_schemas import SAMPLE

Schema = dict[str, Any]
Check = Callable[[Any], object]


@pytest.fixture(scope="module")
def environ(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    # What a service needs to build its settings; the limits themselves take no setting.
    secret = tmp_path_factory.mktemp("secret") / "internal"
    secret.write_text("s" * 64)
    return {"COGRAPH_DATABASE_URL": "postgresql://x/y", "COGRAPH_INTERNAL_SECRET_FILE": str(secret)}


@pytest.fixture(scope="module")
def openapi() -> Schema:
    api = GatewayApi(cast(Backends, None))
    app = FastAPI()
    app.include_router(retrieval_router(api))
    app.include_router(commons_router(api))
    app.include_router(keys_router(cast(KeysStore, None), api))
    return app.openapi()


def _resolve(spec: Schema, schema: Schema) -> Schema:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _resolve(spec, option)
    return schema


def _body_field(spec: Schema, path: str, field: str) -> Schema:
    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return _resolve(spec, _resolve(spec, body)["properties"][field])


def _query_param(spec: Schema, path: str, name: str) -> Schema:
    params = spec["paths"][path]["get"]["parameters"]
    return _resolve(spec, next(p for p in params if p["name"] == name)["schema"])


def _passes(check: Check, value: Any) -> None:
    check(value)  # raises InvalidArgument if the service refuses it


def _refused(check: Check, value: Any) -> None:
    with pytest.raises(InvalidArgument):
        check(value)


def _string_edge(check: Check, most: int) -> None:
    _passes(check, "x" * most)
    _refused(check, "x" * (most + 1))


def _int_edges(check: Check, schema: Schema) -> None:
    _passes(check, schema["minimum"])
    _passes(check, schema["maximum"])
    _refused(check, schema["minimum"] - 1)
    _refused(check, schema["maximum"] + 1)


def test_search_schema_is_what_retrieval_enforces(openapi: Schema) -> None:
    settings = SearchSettings.from_env(Env({}))
    query = _body_field(openapi, "/api/search", "query")
    assert query["maxLength"] == limits.SEARCH_QUERY_MAX_CHARS
    _string_edge(lambda v: build_query(settings, text=v), query["maxLength"])

    top_k = _body_field(openapi, "/api/search", "top_k")
    assert (top_k["minimum"], top_k["maximum"]) == (limits.TOP_K_MIN, limits.TOP_K_MAX)
    _int_edges(lambda v: build_query(settings, text="q", top_k=v), top_k)

    snippet = _body_field(openapi, "/api/search", "snippet_chars")
    assert (snippet["minimum"], snippet["maximum"]) == (
        limits.SNIPPET_CHARS_MIN,
        limits.SNIPPET_CHARS_MAX,
    )
    _int_edges(lambda v: build_query(settings, text="q", snippet_chars=v), snippet)

    repo = _body_field(openapi, "/api/search", "repo")
    _string_edge(lambda v: build_query(settings, text="q", repo=v), repo["maxLength"])
    collection = _body_field(openapi, "/api/search", "collection")
    _string_edge(
        lambda v: build_query(settings, text="q", collection=v, layers=["md_collection"]),
        collection["maxLength"],
    )

    layers = _body_field(openapi, "/api/search", "layers")
    assert tuple(layers["items"]["enum"]) == limits.LAYERS
    _passes(lambda v: build_query(settings, text="q", layers=v), ["code"] * layers["maxItems"])
    _refused(
        lambda v: build_query(settings, text="q", layers=v), ["code"] * (layers["maxItems"] + 1)
    )
    for layer in layers["items"]["enum"]:
        collection_name = "c" if layer == "md_collection" else ""
        build_query(settings, text="q", layers=[layer], collection=collection_name)


def test_route_schema_is_what_the_router_enforces(openapi: Schema, environ: dict[str, str]) -> None:
    enforced = RouterSettings.from_env(Env(environ)).limits
    query = _body_field(openapi, "/api/route", "query")
    assert query["maxLength"] == limits.ROUTE_QUERY_MAX_CHARS
    _string_edge(lambda v: validate_route(enforced, v, None, None), query["maxLength"])
    for field in ("max_repositories", "max_collections"):
        bound = _body_field(openapi, "/api/route", field)

        def check(value: int, field: str = field) -> object:
            counts = {"max_repositories": None, "max_collections": None, field: value}
            return validate_route(
                enforced, "q", counts["max_repositories"], counts["max_collections"]
            )

        _int_edges(check, bound)


def test_commons_schema_is_what_the_commons_enforces(
    openapi: Schema, environ: dict[str, str]
) -> None:
    enforced = CommonsSettings.from_env(Env(environ)).limits
    title = _body_field(openapi, "/v1/posts", "title")
    body = _body_field(openapi, "/v1/posts", "body")
    tags = _body_field(openapi, "/v1/posts", "tags")
    assert title["maxLength"] == limits.POST_TITLE_MAX_CHARS
    assert body["maxLength"] == limits.POST_BODY_MAX_CHARS
    _string_edge(lambda v: validate_post(v, "b", [], enforced), title["maxLength"])
    _string_edge(lambda v: validate_post("t", v, [], enforced), body["maxLength"])
    _string_edge(lambda v: validate_post("t", "b", [v], enforced), tags["items"]["maxLength"])
    many = [f"t{i}" for i in range(tags["maxItems"] + 1)]
    _passes(lambda v: validate_post("t", "b", v, enforced), many[:-1])
    _refused(lambda v: validate_post("t", "b", v, enforced), many)

    comment = _body_field(openapi, "/v1/posts/{post_id}/comments", "body")
    assert comment["maxLength"] == limits.COMMENT_MAX_CHARS
    _string_edge(lambda v: validate_comment(v, enforced), comment["maxLength"])

    q = _query_param(openapi, "/v1/search", "q")
    assert q["maxLength"] == limits.COMMONS_QUERY_MAX_CHARS
    _string_edge(lambda v: validate_query(v, enforced), q["maxLength"])


def test_moderation_schema_is_what_the_commons_enforces(
    openapi: Schema, environ: dict[str, str]
) -> None:
    enforced = CommonsSettings.from_env(Env(environ)).limits
    for path in ("/v1/posts/{post_id}/hide", "/v1/comments/{comment_id}/unhide"):
        reason = _body_field(openapi, path, "reason")
        assert reason["maxLength"] == limits.MODERATION_REASON_MAX_CHARS
        _string_edge(lambda v: validate_reason(v, enforced), reason["maxLength"])
    for path in ("/v1/posts/{post_id}", "/v1/comments/{comment_id}"):
        params = openapi["paths"][path]["delete"]["parameters"]
        query = _resolve(openapi, next(p for p in params if p["name"] == "reason")["schema"])
        assert query["maxLength"] == limits.MODERATION_REASON_MAX_CHARS
    log_limit = _query_param(openapi, "/v1/moderation/log", "limit")
    assert (log_limit["minimum"], log_limit["maximum"]) == (
        limits.MODERATION_LOG_LIMIT_MIN,
        limits.MODERATION_LOG_LIMIT_MAX,
    )
    page = lambda v: validate_log_page(v, 0, enforced)  # noqa: E731
    _passes(page, log_limit["minimum"])
    _passes(page, log_limit["maximum"])
    _refused(page, log_limit["maximum"] + 1)
    # 0 is proto3's unset (the default page) in the service; REST never sends it.
    _refused(page, -1)


def test_listing_and_display_name_schemas_are_what_the_commons_enforces(openapi: Schema) -> None:
    size = _query_param(openapi, "/v1/posts", "limit")
    assert (size["minimum"], size["maximum"]) == (limits.POSTS_LIMIT_MIN, limits.POSTS_LIMIT_MAX)
    page = lambda v: validate_list_page("new", "", v)  # noqa: E731
    _passes(page, size["minimum"])
    _passes(page, size["maximum"])
    _refused(page, size["maximum"] + 1)
    # 0 is proto3's unset (the default page) in the service; REST never sends it.
    _refused(page, -1)
    tag = _query_param(openapi, "/v1/posts", "tag")
    _string_edge(lambda v: validate_list_page("new", v, 0), tag["maxLength"])
    recent = mcp_tools.SCHEMAS["commons_recent"]["properties"]
    assert (recent["limit"]["minimum"], recent["limit"]["maximum"]) == (
        size["minimum"],
        size["maximum"],
    )
    assert recent["tag"]["maxLength"] == tag["maxLength"]
    body = openapi["paths"]["/v1/me"]["put"]["requestBody"]["content"]["application/json"]
    name = _resolve(openapi, _resolve(openapi, body["schema"])["properties"]["display_name"])
    assert name["maxLength"] == limits.DISPLAY_NAME_MAX_CHARS
    _string_edge(validate_display_name, name["maxLength"])


def test_mcp_schemas_publish_the_same_limits(openapi: Schema) -> None:
    tools = mcp_tools.SCHEMAS
    rest_search = {f: _body_field(openapi, "/api/search", f) for f in ("query", "repo", "layers")}
    search = tools["cograph_search"]["properties"]
    assert search["query"]["maxLength"] == rest_search["query"]["maxLength"]
    assert search["repo"]["maxLength"] == rest_search["repo"]["maxLength"]
    assert search["layers"]["maxItems"] == rest_search["layers"]["maxItems"]
    assert tuple(search["layers"]["items"]["enum"]) == limits.LAYERS
    for field in ("top_k", "snippet_chars"):
        rest = _body_field(openapi, "/api/search", field)
        assert (search[field]["minimum"], search[field]["maximum"]) == (
            rest["minimum"],
            rest["maximum"],
        )
    route = tools["cograph_route"]["properties"]
    assert route["query"]["maxLength"] == _body_field(openapi, "/api/route", "query")["maxLength"]
    for field in ("max_repositories", "max_collections"):
        assert route[field]["maximum"] == _body_field(openapi, "/api/route", field)["maximum"]
    graph = tools["cograph_graph"]["properties"]
    assert graph["symbol"]["maxLength"] == _body_field(openapi, "/api/graph", "symbol")["maxLength"]
    post = tools["commons_post"]["properties"]
    for field in ("title", "body"):
        assert post[field]["maxLength"] == _body_field(openapi, "/v1/posts", field)["maxLength"]
    rest_tags = _body_field(openapi, "/v1/posts", "tags")
    assert post["tags"]["maxItems"] == rest_tags["maxItems"]
    assert post["tags"]["items"]["maxLength"] == rest_tags["items"]["maxLength"]
    q = _query_param(openapi, "/v1/search", "q")
    assert tools["commons_search"]["properties"]["query"]["maxLength"] == q["maxLength"]
    read = tools["cograph_read"]["properties"]
    assert read["path"]["maxLength"] == _body_field(openapi, "/api/read", "path")["maxLength"]
    grep = tools["cograph_grep"]["properties"]
    for field in ("pattern", "path_glob"):
        rest = _body_field(openapi, "/api/grep", field)
        rest_max = rest.get("maxLength") or rest["anyOf"][0]["maxLength"]
        assert grep[field]["maxLength"] == rest_max
    rest_limit = _body_field(openapi, "/api/grep", "limit")
    assert grep["limit"]["maximum"] == rest_limit["maximum"] == limits.GREP_LIMIT_MAX
    rest_context = _body_field(openapi, "/api/grep", "context")
    rest_context = rest_context.get("anyOf", [rest_context])[0]
    assert (grep["context"]["minimum"], grep["context"]["maximum"]) == (
        rest_context["minimum"],
        rest_context["maximum"],
    )
    refs = tools["cograph_references"]["properties"]
    rest_symbol = _body_field(openapi, "/api/references", "symbol")
    assert refs["symbol"]["maxLength"] == rest_symbol["maxLength"]
    files = tools["cograph_files"]["properties"]
    assert (
        files["prefix"]["maxLength"] == _query_param(openapi, "/api/files", "prefix")["maxLength"]
    )


def test_agent_context_limits_are_what_retrieval_enforces(openapi: Schema) -> None:
    from retrieval.search.reading import check_context, check_path, check_pattern

    _string_edge(check_path, limits.PATH_MAX_CHARS)
    _string_edge(lambda v: check_pattern(v, regex=False), limits.GREP_PATTERN_MAX_CHARS)
    context = _body_field(openapi, "/api/grep", "context")
    _int_edges(check_context, context.get("anyOf", [context])[0])


@pytest.mark.parametrize("name", sorted(mcp_tools.SCHEMAS))
def test_mcp_argument_models_enforce_their_schemas(name: str) -> None:
    """The tool's pydantic model refuses exactly what its published JSON schema refuses."""
    model = mcp_args.ARGS[name]
    schema = mcp_tools.SCHEMAS[name]
    base = {f: SAMPLE[f] for f in schema["required"]}
    for field, prop in schema["properties"].items():
        if "maxLength" in prop:
            most = prop["maxLength"]
            model.model_validate({**base, field: "x" * most})
            with pytest.raises(ValueError):
                model.model_validate({**base, field: "x" * (most + 1)})
        if "maximum" in prop:
            model.model_validate({**base, field: prop["maximum"]})
            with pytest.raises(ValueError):
                model.model_validate({**base, field: prop["maximum"] + 1})
        if "maxItems" in prop and "enum" not in prop["items"]:
            objects = "anyOf" in prop["items"]

            def item(i: int, objects: bool = objects) -> object:
                # An anchor is the one list of objects a tool takes.
                return {"repo": "github.com/acme/x", "symbol": f"f{i}"} if objects else f"x{i}"

            model.model_validate({**base, field: [item(i) for i in range(prop["maxItems"])]})
            with pytest.raises(ValueError):
                model.model_validate(
                    {**base, field: [item(i) for i in range(prop["maxItems"] + 1)]}
                )


def test_body_limit_default_is_the_shared_constant(environ: dict[str, str]) -> None:
    settings = GatewaySettings.from_env(Env(environ))
    assert settings.max_body_bytes == limits.REQUEST_BODY_MAX_BYTES


def test_anchor_limits_are_what_both_sides_enforce(openapi: Schema) -> None:
    """The anchors' bounds at their edges: the REST model (and so OpenAPI and MCP), and the
    check the commons and retrieval both run (cograph_api.anchors)."""
    from cograph_api.anchors import Target, check_count, check_target
    from svckit.errors import InvalidArgument

    def lines(start: int, end: int) -> Target:
        return Target("github.com/acme/x", "", "a.py", start, end)

    assert check_target(0, lines(1, limits.ANCHOR_LINES_MAX)).end_line == limits.ANCHOR_LINES_MAX
    top = limits.ANCHOR_LINE_MAX
    assert check_target(0, lines(top, top)).start_line == top
    for start, end in ((0, 1), (1, limits.ANCHOR_LINES_MAX + 1), (top + 1, top + 1), (5, 4)):
        with pytest.raises(InvalidArgument, match=r"anchors\[3\]"):
            check_target(3, lines(start, end))
    _string_edge(
        lambda v: check_target(0, Target("github.com/acme/x", "", v, 1, 1)), limits.PATH_MAX_CHARS
    )
    _string_edge(
        lambda v: check_target(0, Target("github.com/acme/x", v, "", 0, 0)),
        limits.SYMBOL_MAX_CHARS,
    )
    check_count(limits.ANCHORS_PER_POST_MAX)
    check_count(1, limits.ANCHORS_PER_POST_MAX - 1)
    with pytest.raises(InvalidArgument, match="at most"):
        check_count(1, limits.ANCHORS_PER_POST_MAX)

    anchors = _body_field(openapi, "/v1/posts", "anchors")
    assert anchors["maxItems"] == limits.ANCHORS_PER_POST_MAX
    ok = {"repo": "github.com/acme/x", "path": "a.py", "start_line": 1}
    anchor = TypeAdapter(models.AnchorTarget)
    anchor.validate_python({**ok, "end_line": limits.ANCHOR_LINES_MAX})
    for bad in (
        {**ok, "end_line": limits.ANCHOR_LINES_MAX + 1},
        {**ok, "start_line": 0, "end_line": 1},
        {**ok, "end_line": 1, "symbol": "f"},
        {"repo": "github.com/acme/x", "path": "a.py"},
        {"repo": "github.com/acme/x"},
    ):
        with pytest.raises(ValueError):
            anchor.validate_python(bad)
    limit = _query_param(openapi, "/v1/anchors", "limit")
    assert (limit["minimum"], limit["maximum"]) == (
        limits.ANCHORS_LIMIT_MIN,
        limits.ANCHORS_LIMIT_MAX,
    )


def test_anchor_review_limits_are_what_the_commons_enforces() -> None:
    from commons.validation import validate_review
    from svckit.errors import InvalidArgument

    assert validate_review("H/o/n", None, 0) == ("h/o/n", None, limits.ANCHORS_LIMIT_DEFAULT)
    assert (
        validate_review("h/o/n", "moved", limits.ANCHORS_LIMIT_MAX)[2] == limits.ANCHORS_LIMIT_MAX
    )
    for repo, status, limit in (
        ("h/o/n", None, limits.ANCHORS_LIMIT_MAX + 1),
        ("h/o/n", None, -1),
        ("h/o/n", "stale", 1),
        ("", None, 1),
        ("x" * (limits.SLUG_MAX_CHARS + 1), None, 1),
    ):
        with pytest.raises(InvalidArgument):
            validate_review(repo, status, limit)


def test_note_search_scope_limits_are_what_the_commons_enforces(openapi: Schema) -> None:
    """A scoped note search (GET /v1/search repo, path, symbol) at its edges: the published
    query parameters and the commons' own check (cograph_api.anchors.check_scope)."""
    from cograph_api.anchors import Scope, check_scope

    for name, most in (
        ("repo", limits.SLUG_MAX_CHARS),
        ("path", limits.PATH_MAX_CHARS),
        ("symbol", limits.SYMBOL_MAX_CHARS),
    ):
        assert _query_param(openapi, "/v1/search", name)["maxLength"] == most
    _string_edge(lambda v: check_scope(v, "", ""), limits.SLUG_MAX_CHARS)
    _string_edge(lambda v: check_scope("h/o/n", v, ""), limits.PATH_MAX_CHARS)
    _string_edge(lambda v: check_scope("h/o/n", "", v), limits.SYMBOL_MAX_CHARS)

    assert check_scope("", "", "") is None
    assert check_scope(" H/O/N ", "./billing/", "") == Scope("h/o/n", "billing", "")
    assert check_scope("h/o/n", "a/b.py", "Ledger.refund") == Scope(
        "h/o/n", "a/b.py", "Ledger.refund"
    )
    for repo, path, symbol, field in (
        ("", "billing", "", "repo"),
        ("", "", "refund", "repo"),
        ("h/o/n", "../etc", "", "path"),
        ("h/o/n", "a/../b", "", "path"),
        ("h/o/n", "/etc/passwd", "", "path"),
        ("h/o/n", "a\\b", "", "path"),
        ("h/o/n", "a//b", "", "path"),
        ("h/o/n", "/", "", "path"),
        ("h/o/n", "a\x00b", "", "path"),
        ("h/o/n", "", "refund.", "symbol"),
        ("h/o/n", "", "a..b", "symbol"),
        ("h/\x01", "", "", "repo"),
    ):
        with pytest.raises(InvalidArgument, match=f"^{field}:"):
            check_scope(repo, path, symbol)

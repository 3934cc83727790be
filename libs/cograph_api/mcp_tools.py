"""The MCP server: Cograph's tools for agents, over streamable HTTP (/mcp) and stdio.

Tools are thin: each validates its arguments with the limits REST and the services use
(cograph_api.limits, in the argument models and the published JSON schemas) and calls a
`CographApi` -- the in-gateway GatewayApi for /mcp (acting for the key's principal), or a
RestClient to the gateway for `cograph mcp` over stdio (acting for COGRAPH_API_KEY).
Failures come back as tool results with is_error set and the REST error body, so an agent
can read "semantic_search_unavailable" and carry on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cograph_api import limits as L
from cograph_api import rest_models as models
from cograph_api.operations import CographApi, Json
from cograph_api.rest_errors import ApiError
from svckit import requestctx

log = logging.getLogger(__name__)

SERVER_NAME = "cograph"
INSTRUCTIONS = (
    "Cograph answers questions about indexed code and documentation and hosts a shared "
    "notes board (the commons). Use cograph_route when you do not know which repository "
    "to look in, cograph_search to find code and docs (keep top_k and snippet_chars small "
    "to save context), cograph_graph for callers and callees of a symbol, cograph_status "
    "to see what is indexed and whether it is stale. Before a hard task, commons_search for "
    "notes other agents left; after solving something non-obvious, commons_post a note. "
    "A result with error semantic_search_unavailable means: skip it and carry on."
)

# ---- argument models (the REST limits, plus MCP-friendly defaults) ----

_STRICT = ConfigDict(extra="forbid")
MCP_TOP_K_DEFAULT = 8  # smaller than REST's default: an agent's context is the budget
PostId = Annotated[str, Field(min_length=1, max_length=L.ID_MAX_CHARS)]


class SearchArgs(BaseModel):
    model_config = _STRICT
    query: models.Query
    repo: models.Slug | None = None
    collection: models.Name | None = None
    layers: list[models.Layer] | None = Field(None, max_length=L.LAYERS_MAX)
    top_k: models.StrictInt = Field(MCP_TOP_K_DEFAULT, ge=L.TOP_K_MIN, le=L.TOP_K_MAX)
    snippet_chars: models.StrictInt = Field(
        models.SNIPPET_DEFAULT, ge=models.SNIPPET_MIN, le=models.SNIPPET_MAX
    )
    include_graph: models.StrictBool = False
    since: str | None = None
    until: str | None = None
    as_of: str | None = None


class RouteArgs(BaseModel):
    model_config = _STRICT
    query: models.RouteQuery
    max_repositories: models.StrictInt = Field(
        L.ROUTE_RESULTS_DEFAULT, ge=L.ROUTE_RESULTS_MIN, le=L.ROUTE_RESULTS_MAX
    )
    max_collections: models.StrictInt = Field(
        L.ROUTE_RESULTS_DEFAULT, ge=L.ROUTE_RESULTS_MIN, le=L.ROUTE_RESULTS_MAX
    )


class GraphArgs(BaseModel):
    model_config = _STRICT
    symbol: models.Symbol
    repo: models.Slug


class StatusArgs(BaseModel):
    model_config = _STRICT
    repo: models.Slug | None = None


class CommonsSearchArgs(BaseModel):
    model_config = _STRICT
    query: models.CommonsQuery


class CommonsGetArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    include_comments: models.StrictBool = True


class CommonsPostArgs(BaseModel):
    model_config = _STRICT
    title: models.PostTitle
    body: models.PostBody
    tags: list[models.Tag] = Field(default_factory=list, max_length=L.POST_TAGS_MAX)


class CommonsVoteArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    direction: Literal["up", "down", "none"]


# ---- JSON schemas, written out so each property says what it does ----

_TIME = {
    "type": "string",
    "format": "date-time",
}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_QUERY = {"type": "string", "minLength": 1, "maxLength": L.SEARCH_QUERY_MAX_CHARS}
_SLUG = {
    "type": "string",
    "minLength": 1,
    "maxLength": L.SLUG_MAX_CHARS,
    "description": "Repository slug host/owner/name, e.g. github.com/acme/billing.",
}
_POST_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": L.ID_MAX_CHARS,
    "description": "The note's id (a UUID) from commons_search or commons_post.",
}

_ROUTE_RESULTS = {
    "type": "integer",
    "minimum": L.ROUTE_RESULTS_MIN,
    "maximum": L.ROUTE_RESULTS_MAX,
    "default": L.ROUTE_RESULTS_DEFAULT,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "cograph_search": _obj(
        {
            "query": {
                **_QUERY,
                "description": "An exact symbol (ParseConfig), a signature "
                "fragment (func (s *Server) Handle) or a question in prose.",
            },
            "repo": {
                **_SLUG,
                "description": "Only this repository (host/owner/name). "
                "Required for include_graph.",
            },
            "collection": {
                "type": "string",
                "minLength": 1,
                "maxLength": L.NAME_MAX_CHARS,
                "description": "Search this markdown collection instead of code.",
            },
            "layers": {
                "type": "array",
                "maxItems": L.LAYERS_MAX,
                "uniqueItems": True,
                "items": {"type": "string", "enum": list(models.LAYERS)},
                "description": "code (bodies), ast (signatures only), ast_summary "
                "(summaries), repo_doc (repository markdown), md_collection (with "
                "collection). Default: code, ast_summary, repo_doc.",
            },
            "top_k": {
                "type": "integer",
                "minimum": L.TOP_K_MIN,
                "maximum": L.TOP_K_MAX,
                "default": MCP_TOP_K_DEFAULT,
                "description": "Results to return; the main token lever.",
            },
            "snippet_chars": {
                "type": "integer",
                "minimum": models.SNIPPET_MIN,
                "maximum": models.SNIPPET_MAX,
                "default": models.SNIPPET_DEFAULT,
                "description": "Width of each snippet in characters.",
            },
            "include_graph": {
                "type": "boolean",
                "default": False,
                "description": "Add callers, callees and containers of the "
                "code results (needs repo).",
            },
            "since": {**_TIME, "description": "Only content changed after this RFC 3339 time."},
            "until": {**_TIME, "description": "Only content changed before this time."},
            "as_of": {**_TIME, "description": "Only content that existed at this time."},
        },
        ["query"],
    ),
    "cograph_route": _obj(
        {
            "query": {
                **_QUERY,
                "maxLength": L.ROUTE_QUERY_MAX_CHARS,
                "description": "The question or task, in words.",
            },
            "max_repositories": _ROUTE_RESULTS,
            "max_collections": _ROUTE_RESULTS,
        },
        ["query"],
    ),
    "cograph_graph": _obj(
        {
            "symbol": {
                "type": "string",
                "minLength": 1,
                "maxLength": L.SYMBOL_MAX_CHARS,
                "description": "A function, method or class name, qualified or not "
                "(billing.retry_charge, Server.Handle).",
            },
            "repo": _SLUG,
        },
        ["symbol", "repo"],
    ),
    "cograph_status": _obj(
        {"repo": {**_SLUG, "description": "Only this repository; default: everything."}}, []
    ),
    "commons_search": _obj(
        {
            "query": {
                **_QUERY,
                "maxLength": L.COMMONS_QUERY_MAX_CHARS,
                "description": "What you are about to do or "
                'the problem you hit. "Quoted phrases" must appear literally in a note.',
            }
        },
        ["query"],
    ),
    "commons_get": _obj(
        {
            "post_id": _POST_ID,
            "include_comments": {
                "type": "boolean",
                "default": True,
                "description": "Also return the note's comments.",
            },
        },
        ["post_id"],
    ),
    "commons_post": _obj(
        {
            "title": {
                "type": "string",
                "minLength": 1,
                "maxLength": L.POST_TITLE_MAX_CHARS,
                "description": "One line stating the lesson, e.g. 'Sign-up lives in "
                "auth/signup.tsx, never add registration'.",
            },
            "body": {
                "type": "string",
                "minLength": 1,
                "maxLength": L.POST_BODY_MAX_CHARS,
                "description": "What you found, why it matters, and where (paths).",
            },
            "tags": {
                "type": "array",
                "maxItems": L.POST_TAGS_MAX,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": L.TAG_MAX_CHARS,
                    "pattern": r"^\S+$",
                },
                "description": "Short lower-case tags without spaces.",
            },
        },
        ["title", "body"],
    ),
    "commons_vote": _obj(
        {
            "post_id": _POST_ID,
            "direction": {
                "type": "string",
                "enum": ["up", "down", "none"],
                "description": "up if the note helped, down if it was wrong, none to "
                "withdraw your vote.",
            },
        },
        ["post_id", "direction"],
    ),
}

DESCRIPTIONS: dict[str, str] = {
    "cograph_search": (
        "Search indexed code and documentation with hybrid retrieval (exact symbol, "
        "lexical and semantic, fused). Returns cited results: repo, path, start_line-"
        "end_line, commit, qualified_name, a snippet (truncated flag set when cut) and "
        "provenance (which stream found it, at which rank). Bounded by top_k and "
        "snippet_chars. Time filters since/until/as_of take RFC 3339 timestamps."
    ),
    "cograph_route": (
        "Given a question, say which repositories and which markdown collections to look "
        "in, each with a confidence in [0, 1] and a one-line rationale. Repositories with "
        "no match are omitted; weak collections are marked (weak/fallback). Use before "
        "cograph_search when you do not know the repository."
    ),
    "cograph_graph": (
        "Find a symbol's definitions in one repository (exact qualified name first, then "
        "bare name) and return their neighbourhood: callers, callees and the containing "
        "class or module as nodes (path, lines, signature) and typed edges {from, to, kind} "
        "with kind calls, imports, inherits, implements or contains. At most 20 nodes."
    ),
    "cograph_status": (
        "What is indexed: each readable repository with its branch, indexed commit, "
        "indexed time and file/node/edge/doc-chunk counts, the branch's current head "
        "(head_commit) and whether the index is stale against it (stale: true/false, null "
        "when the head cannot be read, freshness_detail saying why), plus the readable "
        "collections. A stale repository's results may miss recent changes."
    ),
    "commons_search": (
        "Search the commons, notes other agents left about pitfalls and conventions. "
        "Returns up to 10 notes, best first (similarity blended with votes), each with a "
        "body snippet (body_truncated, body_chars), score and comment_count. Error "
        "semantic_search_unavailable: skip the commons and carry on."
    ),
    "commons_get": "Read one whole note of the commons, and its comments.",
    "commons_post": (
        "Leave a note in the commons for other agents: a non-obvious lesson, convention or "
        "pitfall you confirmed. Returns the stored note at once; it becomes searchable a "
        "moment later."
    ),
    "commons_vote": (
        "Vote on a commons note: up when it helped, down when it was wrong, none to "
        "withdraw. One vote per principal and note, never on your own notes "
        "(error own_post_vote); returns the note's new score."
    ),
}

READ_ONLY = {
    "cograph_search",
    "cograph_route",
    "cograph_graph",
    "cograph_status",
    "commons_search",
    "commons_get",
}


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            description=DESCRIPTIONS[name],
            input_schema=SCHEMAS[name],
            annotations=types.ToolAnnotations(
                read_only_hint=name in READ_ONLY,
                destructive_hint=False,
                idempotent_hint=name in READ_ONLY or name == "commons_vote",
                open_world_hint=False,
            ),
        )
        for name in SCHEMAS
    ]


# ---- tool implementations ----

Handler = Callable[[CographApi, dict[str, Any]], Awaitable[Json]]


def _search_request(args: SearchArgs) -> models.SearchRequest:
    return models.SearchRequest.model_validate(args.model_dump(exclude_none=True))


async def _search(api: CographApi, raw: dict[str, Any]) -> Json:
    return await api.search(_search_request(SearchArgs.model_validate(raw)))


async def _route(api: CographApi, raw: dict[str, Any]) -> Json:
    args = RouteArgs.model_validate(raw)
    return await api.route(models.RouteRequest.model_validate(args.model_dump()))


async def _graph(api: CographApi, raw: dict[str, Any]) -> Json:
    args = GraphArgs.model_validate(raw)
    return await api.graph(models.GraphRequest.model_validate(args.model_dump()))


_STALE = {"current": False, "stale": True}


async def _status(api: CographApi, raw: dict[str, Any]) -> Json:
    args = StatusArgs.model_validate(raw)
    if args.repo:
        repositories = [await api.get_repository(args.repo)]
    else:
        repositories = (await api.list_repositories())["repositories"]
    for repo in repositories:
        # One field an agent can branch on; freshness_detail says why it is null.
        repo["stale"] = _STALE.get(repo.get("freshness", ""))
    collections = [] if args.repo else (await api.list_collections())["collections"]
    return {"repositories": repositories, "collections": collections}


async def _commons_search(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsSearchArgs.model_validate(raw)
    return await api.search_posts(args.query)


async def _commons_get(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsGetArgs.model_validate(raw)
    post = await api.get_post(args.post_id)
    if args.include_comments:
        post["comments"] = (await api.list_comments(args.post_id))["comments"]
    return post


async def _commons_post(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsPostArgs.model_validate(raw)
    return await api.create_post(models.NewPost.model_validate(args.model_dump()))


async def _commons_vote(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsVoteArgs.model_validate(raw)
    return await api.vote(args.post_id, models.Vote(direction=args.direction))


HANDLERS: dict[str, Handler] = {
    "cograph_search": _search,
    "cograph_route": _route,
    "cograph_graph": _graph,
    "cograph_status": _status,
    "commons_search": _commons_search,
    "commons_get": _commons_get,
    "commons_post": _commons_post,
    "commons_vote": _commons_vote,
}


def _result(body: Json, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=error,
    )


def _validation_detail(err: ValidationError) -> str:
    parts = []
    for item in err.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)


async def call_tool(
    api: CographApi, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Runs one tool; every failure is a tool result with is_error, never a protocol error."""
    handler = HANDLERS.get(name)
    if handler is None:
        return _result({"error": "not_found", "detail": f"no tool {name}"}, error=True)
    try:
        return _result(await handler(api, arguments or {}))
    except ValidationError as err:
        return _result({"error": "invalid_argument", "detail": _validation_detail(err)}, error=True)
    except ApiError as err:
        return _result(err.body(), error=True)


def build_mcp_server(
    api: CographApi, principal_of: Callable[[Any], requestctx.Principal | None] | None = None
) -> Server[Any]:
    """A low-level MCP server exposing the tools over `api`.

    Over HTTP, `principal_of` reads the caller the HTTP server authenticated from the ASGI
    scope of the request (the gateway's auth middleware); over stdio there is none.
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # Over HTTP the tool runs in the session manager's tasks, outside the request's
        # context: re-establish the principal the auth middleware put on the request.
        request = ctx.request
        scope = getattr(request, "scope", None)
        if scope is None or principal_of is None:
            return await call_tool(api, params.name, params.arguments)
        token = requestctx.set_principal(principal_of(scope))
        rid = requestctx.set_request_id(requestctx.new_request_id())
        try:
            return await call_tool(api, params.name, params.arguments)
        finally:
            requestctx.reset_request_id(rid)
            requestctx.reset_principal(token)

    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )


@dataclass
class McpHttp:
    """The /mcp endpoint and the session manager whose run() must span the app's life."""

    asgi: StreamableHTTPASGIApp
    manager: StreamableHTTPSessionManager


def mcp_http(server: Server[Any]) -> McpHttp:
    # Stateless with JSON responses: any gateway replica can answer any request, so no
    # sticky sessions are needed behind a load balancer. Authentication is the gateway's
    # own middleware (Bearer API keys), applied before this app is reached.
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    return McpHttp(StreamableHTTPASGIApp(manager), manager)


async def serve_stdio(api: CographApi) -> None:
    """Serves the tools on stdin/stdout until the client closes them (`cograph mcp`)."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(api)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())

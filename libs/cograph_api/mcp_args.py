"""The MCP tools' arguments: one pydantic model per tool, and the JSON schema it publishes.

Each model is the whole contract of a tool's input: the limits (from cograph_api.limits,
through the REST field types), the defaults, the allowed values and what each argument
means. A tool's inputSchema is generated from its model (`input_schema`), so what an agent
is told it may send is exactly what the tool accepts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from cograph_api import limits as L
from cograph_api import rest_models as models

_STRICT = ConfigDict(extra="forbid")
MCP_TOP_K_DEFAULT = 8  # smaller than REST's default: an agent's context is the budget
MCP_GREP_LIMIT_DEFAULT = 50
MCP_REFERENCES_LIMIT_DEFAULT = 50
# A tag as the commons stores it: one word (the service lower-cases it and drops repeats).
TAG_PATTERN = r"^\S+$"

# ---- argument types shared by several tools (a field's own description overrides) ----

Repo = Annotated[
    models.Slug,
    Field(description="Repository slug host/owner/name, e.g. github.com/acme/billing."),
]
Ref = Annotated[
    models.RefName,
    Field(description="A branch or tag name, e.g. release/2.0 or v1.2."),
]
Collection = Annotated[models.Name, Field(description="A markdown collection's name.")]
PostId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=L.ID_MAX_CHARS,
        description="The note's id (a UUID) from commons_search or commons_post.",
    ),
]
Cursor = Annotated[
    models.Cursor,
    Field(description="next_cursor from the previous page; omit for the first page."),
]
IndexedPath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=L.PATH_MAX_CHARS,
        description="The file's path as indexed (as search results give it).",
    ),
]
# An RFC 3339 time, parsed by the REST request the tool builds (models.SearchRequest).
Time = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


def _distinct(values: list[models.Layer]) -> list[models.Layer]:
    if len(set(values)) != len(values):
        raise ValueError("must not name a layer twice")
    return values


Layers = Annotated[
    list[models.Layer],
    Field(max_length=L.LAYERS_MAX, json_schema_extra={"uniqueItems": True}),
    AfterValidator(_distinct),
]
RouteResults = Annotated[models.StrictInt, Field(ge=L.ROUTE_RESULTS_MIN, le=L.ROUTE_RESULTS_MAX)]
# The REST tag with the pattern in front: pydantic publishes only the constraints that
# come before a validator function (models.Tag ends with the text check).
Tag = Annotated[str, StringConstraints(pattern=TAG_PATTERN), *models.Tag.__metadata__]


# ---- one model per tool ----


class SearchArgs(BaseModel):
    model_config = _STRICT
    query: models.Query = Field(
        description="An exact symbol (ParseConfig), a signature fragment "
        "(func (s *Server) Handle) or a question in prose."
    )
    repo: Repo | None = Field(
        None, description="Only this repository (host/owner/name). Required for include_graph."
    )
    ref: Ref | None = Field(
        None,
        description="Search this indexed branch or tag of repo (see cograph_list_refs) "
        "instead of its default branch; needs repo.",
    )
    collection: Collection | None = Field(
        None, description="Search this markdown collection instead of code."
    )
    layers: Layers | None = Field(
        None,
        description="code (bodies), ast (signatures only), ast_summary (summaries), repo_doc "
        "(repository markdown), md_collection (with collection). Default: code, ast_summary, "
        "repo_doc.",
    )
    top_k: models.StrictInt = Field(
        MCP_TOP_K_DEFAULT,
        ge=L.TOP_K_MIN,
        le=L.TOP_K_MAX,
        description="Results to return; the main token lever.",
    )
    snippet_chars: models.StrictInt = Field(
        models.SNIPPET_DEFAULT,
        ge=models.SNIPPET_MIN,
        le=models.SNIPPET_MAX,
        description="Most characters of each snippet, cut at line boundaries: a preview to "
        "judge and cite a result; cograph_read returns the full range.",
    )
    include_graph: models.StrictBool = Field(
        False, description="Add callers, callees and containers of the code results (needs repo)."
    )
    since: Time | None = Field(None, description="Only content changed after this RFC 3339 time.")
    until: Time | None = Field(None, description="Only content changed before this time.")
    as_of: Time | None = Field(None, description="Only content that existed at this time.")
    max_tokens: models.StrictInt | None = Field(
        None,
        ge=L.MAX_TOKENS_MIN,
        le=L.MAX_TOKENS_MAX,
        description="A hard budget for the results in tokens: the best that fit, never more "
        "(the answer says tokens used and how many were omitted).",
    )
    verbose: models.StrictBool = Field(
        False, description="Full provenance per result; compact otherwise."
    )
    explain: models.StrictBool = Field(
        False,
        description="Why each result ranks where it does: the query's class, what each "
        "ranking stage did, and per result its streams' ranks and each stage's effect.",
    )
    notes: models.StrictBool = Field(
        True,
        description="Show, on each code result, the commons' notes anchored to it (id, "
        "title, score, status: fresh, body_changed, signature_changed or moved), counted in "
        "max_tokens; false leaves them out.",
    )


class RouteArgs(BaseModel):
    model_config = _STRICT
    query: models.RouteQuery = Field(description="The question or task, in words.")
    max_repositories: RouteResults = Field(
        L.ROUTE_RESULTS_DEFAULT, description="Most repositories to return."
    )
    max_collections: RouteResults = Field(
        L.ROUTE_RESULTS_DEFAULT, description="Most collections to return."
    )


class GraphArgs(BaseModel):
    model_config = _STRICT
    symbol: models.Symbol = Field(
        description="A function, method or class name, qualified or not "
        "(billing.retry_charge, Server.Handle)."
    )
    repo: Repo


class StatusArgs(BaseModel):
    model_config = _STRICT
    repo: Repo | None = Field(None, description="Only this repository; default: everything.")


class CommonsSearchArgs(BaseModel):
    model_config = _STRICT
    query: models.CommonsQuery = Field(
        description="What you are about to do or the problem you hit. "
        '"Quoted phrases" must appear literally in a note.'
    )
    repo: models.Slug | None = Field(
        None,
        description="Only notes anchored to code in this repository (host/owner/name): the "
        "notes about the code you are working on.",
    )
    path: models.FilePath | None = Field(
        None,
        description="With repo: only notes anchored in this file or under this directory.",
    )
    symbol: models.Symbol | None = Field(
        None,
        description="With repo: only notes anchored to this symbol, by qualified name or a "
        "dotted suffix of it (refund, Ledger.refund).",
    )


class CommonsRecentArgs(BaseModel):
    model_config = _STRICT
    sort: L.PostSort = Field(
        "new", description="new: the latest notes first; top: the best voted first."
    )
    tag: Tag | None = Field(None, description="Only notes with this tag.")
    cursor: Cursor | None = None
    limit: models.StrictInt = Field(
        L.POSTS_LIMIT_DEFAULT,
        ge=L.POSTS_LIMIT_MIN,
        le=L.POSTS_LIMIT_MAX,
        description="Notes per page.",
    )


class CommonsGetArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    include_comments: models.StrictBool = Field(
        True, description="Also return the note's comments."
    )


class CommonsPostArgs(BaseModel):
    model_config = _STRICT
    title: models.PostTitle = Field(
        description="One line stating the lesson, e.g. 'Sign-up lives in auth/signup.tsx, "
        "never add registration'."
    )
    body: models.PostBody = Field(description="What you found, why it matters, and where (paths).")
    tags: list[Tag] = Field(
        default_factory=list,
        max_length=L.POST_TAGS_MAX,
        description="Short lower-case tags without spaces.",
    )
    anchors: list[models.AnchorTarget] = Field(
        default_factory=list,
        max_length=L.ANCHORS_PER_POST_MAX,
        description="The code the note is about: {repo, symbol} or {repo, path, start_line, "
        "end_line}. The note is then shown beside that code, and flagged when it changes.",
    )


class CommonsAnchorArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    anchors: list[models.AnchorTarget] = Field(
        min_length=1,
        max_length=L.ANCHORS_PER_POST_MAX,
        description="The code the note is about: {repo, symbol} or {repo, path, start_line, "
        f"end_line}}; a note holds at most {L.ANCHORS_PER_POST_MAX} anchors in all.",
    )


class CommonsConfirmAnchorArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    anchor_id: Annotated[str, Field(min_length=1, max_length=L.ID_MAX_CHARS)] = Field(
        description="The anchor's id, as commons_get or commons_anchors give it."
    )


class CommonsAnchorsArgs(BaseModel):
    model_config = _STRICT
    repo: models.Slug = Field(description="host/owner/name of a repository you may read.")
    status: L.AnchorStatus | None = Field(
        None,
        description="Only anchors with this status; omitted: every status but fresh "
        "(body_changed, signature_changed, moved, orphaned).",
    )
    limit: models.StrictInt = Field(
        L.ANCHORS_LIMIT_DEFAULT,
        ge=L.ANCHORS_LIMIT_MIN,
        le=L.ANCHORS_LIMIT_MAX,
        description="Anchors per answer.",
    )


class CommonsVoteArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    direction: Literal["up", "down", "none"] = Field(
        description="up if the note helped, down if it was wrong, none to withdraw your vote."
    )


class CommonsCommentArgs(BaseModel):
    model_config = _STRICT
    post_id: PostId
    body: Annotated[str, Field(min_length=1, max_length=L.COMMENT_MAX_CHARS)] = Field(
        description="What you add: a confirmation, a correction, a caveat."
    )


class ReadArgs(BaseModel):
    model_config = _STRICT
    path: models.FilePath = Field(
        description="The file's path as indexed (as search results give it)."
    )
    repo: Repo | None = Field(None, description="The repository; or give collection.")
    ref: Ref | None = Field(
        None, description="Read this indexed branch or tag of repo instead of its default."
    )
    collection: Collection | None = Field(None, description="The collection; or give repo.")
    start_line: models.StrictInt | None = Field(None, ge=1, description="First line.")
    end_line: models.StrictInt | None = Field(
        None,
        ge=1,
        description=f"Last line, inclusive. One answer holds at most {L.READ_MAX_LINES} lines "
        f"and {L.READ_MAX_CHARS} characters; next_start_line says where to go on.",
    )
    notes: models.StrictBool = Field(
        True,
        description="Show the commons' notes anchored to code in the lines returned; false "
        "leaves them out.",
    )


class FilesArgs(BaseModel):
    model_config = _STRICT
    repo: Repo
    ref: Ref | None = Field(None, description="An indexed branch or tag of repo.")
    prefix: Annotated[str, Field(max_length=L.PATH_MAX_CHARS)] = Field(
        "", description="Only paths starting with this (e.g. src/ or src/app)."
    )
    cursor: Cursor | None = None
    limit: models.StrictInt = Field(
        L.FILES_LIMIT_DEFAULT,
        ge=L.FILES_LIMIT_MIN,
        le=L.FILES_LIMIT_MAX,
        description="Files per page.",
    )


class GrepArgs(BaseModel):
    model_config = _STRICT
    repo: Repo | None = Field(
        None,
        description="Repository slug host/owner/name; omit to search every repository you "
        "may read (each match then names its repo).",
    )
    ref: Ref | None = Field(None, description="An indexed branch or tag of repo; needs repo.")
    pattern: Annotated[str, Field(min_length=1, max_length=L.GREP_PATTERN_MAX_CHARS)] = Field(
        description="Text to find; a POSIX regular expression (PostgreSQL dialect) when regex "
        "is true. No (?i): use case_insensitive."
    )
    regex: models.StrictBool = Field(
        False, description="Read pattern as a regular expression instead of literal text."
    )
    case_insensitive: models.StrictBool = Field(False, description="Match letters in either case.")
    context: models.StrictInt = Field(
        0,
        ge=L.GREP_CONTEXT_MIN,
        le=L.GREP_CONTEXT_MAX,
        description="Lines to show before and after each match (before, after).",
    )
    path_glob: Annotated[str, Field(max_length=L.GREP_GLOB_MAX_CHARS)] | None = Field(
        None, description="Only paths matching this glob, e.g. src/*.py (* matches /)."
    )
    limit: models.StrictInt = Field(
        MCP_GREP_LIMIT_DEFAULT,
        ge=L.GREP_LIMIT_MIN,
        le=L.GREP_LIMIT_MAX,
        description="Matching lines to return.",
    )


class ReferencesArgs(BaseModel):
    model_config = _STRICT
    repo: Repo
    ref: Ref | None = Field(None, description="An indexed branch or tag of repo.")
    symbol: models.Symbol = Field(
        description="A qualified name (pkg.mod.Class.method), a dotted suffix (Class.method) "
        "or a bare name."
    )
    cursor: Cursor | None = None
    limit: models.StrictInt = Field(
        MCP_REFERENCES_LIMIT_DEFAULT,
        ge=L.REFERENCES_LIMIT_MIN,
        le=L.REFERENCES_LIMIT_MAX,
        description="References per page.",
    )
    notes: models.StrictBool = Field(
        True,
        description="Show, on each reference, the commons' notes anchored to the symbol "
        "holding it; false leaves them out.",
    )


class IndexArgs(BaseModel):
    model_config = _STRICT
    repo: Repo = Field(
        description="The repository to index: again from its stored source, or from source "
        "when given."
    )
    source: Annotated[str, Field(min_length=1, max_length=L.SOURCE_MAX_CHARS)] | None = Field(
        None,
        description="A git URL (https, ssh, git) to index as repo: adds the repository where "
        "the key may create one. Omit to re-index.",
    )
    branch: Annotated[str, Field(min_length=1, max_length=L.BRANCH_MAX_CHARS)] | None = Field(
        None,
        description="The branch to index; default: the stored one, or the source's default branch.",
    )
    ref: Ref | None = Field(
        None,
        description="Index this branch or tag of repo as its own snapshot, beside its default "
        "branch (searched with ref; needs a write grant). Not with source or branch.",
    )


class JobArgs(BaseModel):
    model_config = _STRICT
    job_id: Annotated[str, Field(min_length=1, max_length=L.ID_MAX_CHARS)] = Field(
        description="The job's id, as cograph_index returned it."
    )


class OutlineArgs(BaseModel):
    model_config = _STRICT
    repo: Repo
    path: IndexedPath
    ref: Ref | None = Field(None, description="An indexed branch or tag of repo.")


class ListRefsArgs(BaseModel):
    model_config = _STRICT
    repo: Repo
    remote: models.StrictBool = Field(
        False, description="Also list the branches and tags the source has now."
    )


class RemoveArgs(BaseModel):
    model_config = _STRICT
    repo: Repo | None = Field(None, description="The repository to remove; or give collection.")
    collection: Annotated[str, Field(min_length=1, max_length=L.NAME_MAX_CHARS)] | None = Field(
        None, description="The collection to remove; or repo."
    )


# Tool name -> its argument model, in the order tools/list gives them.
ARGS: dict[str, type[BaseModel]] = {
    "cograph_search": SearchArgs,
    "cograph_route": RouteArgs,
    "cograph_graph": GraphArgs,
    "cograph_status": StatusArgs,
    "cograph_read": ReadArgs,
    "cograph_files": FilesArgs,
    "cograph_grep": GrepArgs,
    "cograph_references": ReferencesArgs,
    "cograph_index": IndexArgs,
    "cograph_job": JobArgs,
    "cograph_outline": OutlineArgs,
    "cograph_list_refs": ListRefsArgs,
    "cograph_remove": RemoveArgs,
    "commons_search": CommonsSearchArgs,
    "commons_recent": CommonsRecentArgs,
    "commons_get": CommonsGetArgs,
    "commons_post": CommonsPostArgs,
    "commons_comment": CommonsCommentArgs,
    "commons_vote": CommonsVoteArgs,
    "commons_anchors": CommonsAnchorsArgs,
    "commons_anchor": CommonsAnchorArgs,
    "commons_confirm_anchor": CommonsConfirmAnchorArgs,
}


# ---- the published JSON schema ----


def _plain(node: Any, defs: dict[str, Any]) -> Any:
    """A pydantic schema node made plain: references inlined, `title` dropped, and an
    optional argument (`X | None = None`) published as X with no default. Omitting it is
    how a client leaves it unset; the model also takes an explicit null for that."""
    if isinstance(node, list):
        return [_plain(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _plain({**defs[ref.removeprefix("#/$defs/")], **siblings}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "properties":
            out[key] = {name: _plain(prop, defs) for name, prop in value.items()}
        else:
            out[key] = _plain(value, defs)
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"]
            out = {**rest[0], **out}
            if "default" in out and out["default"] is None:
                del out["default"]
    return out


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's inputSchema: a self-contained JSON schema object generated from `model`."""
    generated = model.model_json_schema()
    schema = _plain(generated, generated.get("$defs", {}))
    return {
        "type": "object",
        "properties": schema["properties"],
        "required": schema.get("required", []),
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {name: input_schema(model) for name, model in ARGS.items()}

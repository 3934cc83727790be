"""Request bodies and their limits, checked before any backend is called.

Every size and range comes from cograph_api.limits, the constants the services enforce too,
so the OpenAPI schema never promises more than a service accepts. Services still check
their own rules (blank after trimming, tag syntax...) and their INVALID_ARGUMENT comes back
as a 400 naming the field. Unknown fields are rejected so a typo'd option never silently
does nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from cograph_api import limits as L
from cograph_api.rest_errors import invalid


def _clean(value: str) -> str:
    # PostgreSQL rejects NUL and protobuf cannot encode lone surrogates; both would surface
    # as a 5xx far from the caller, so they are a 400 here.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Text = Annotated[str, AfterValidator(_clean)]


def _len(max_chars: int, min_chars: int = 1) -> StringConstraints:
    return StringConstraints(min_length=min_chars, max_length=max_chars)


_CLEAN = AfterValidator(_clean)
Query = Annotated[str, _len(L.SEARCH_QUERY_MAX_CHARS), _CLEAN]
RouteQuery = Annotated[str, _len(L.ROUTE_QUERY_MAX_CHARS), _CLEAN]
CommonsQuery = Annotated[str, _len(L.COMMONS_QUERY_MAX_CHARS), _CLEAN]
Name = Annotated[str, _len(L.NAME_MAX_CHARS), _CLEAN]
Slug = Annotated[str, _len(L.SLUG_MAX_CHARS), _CLEAN]
# A branch or tag name; the service checks it against git's rules (no leading '-', no '..').
RefName = Annotated[str, _len(L.REF_MAX_CHARS), _CLEAN]
Symbol = Annotated[str, _len(L.SYMBOL_MAX_CHARS), _CLEAN]
PostTitle = Annotated[str, _len(L.POST_TITLE_MAX_CHARS), _CLEAN]
PostBody = Annotated[str, _len(L.POST_BODY_MAX_CHARS), _CLEAN]
Tag = Annotated[str, _len(L.TAG_MAX_CHARS), _CLEAN]
Layer = L.Layer
StrictInt = Annotated[int, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]

LAYERS: tuple[str, ...] = L.LAYERS
SNIPPET_MIN, SNIPPET_MAX = L.SNIPPET_CHARS_MIN, L.SNIPPET_CHARS_MAX
SNIPPET_DEFAULT = L.SNIPPET_CHARS_DEFAULT
TOP_K_MAX = L.TOP_K_MAX


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class SearchRequest(Body):
    """Hybrid code and documentation search over repositories and collections."""

    query: Annotated[Query, AfterValidator(_not_blank)] = Field(
        description="What to look for: a symbol, a signature fragment or a question."
    )
    repo: Slug | None = Field(None, description="Scope to one repository (host/owner/name).")
    ref: RefName | None = Field(
        None,
        description="Search this indexed ref (branch or tag) of repo instead of its default "
        "branch; needs repo. Without it, only default branches are searched.",
    )
    collection: Name | None = Field(None, description="Search one markdown collection instead.")
    layers: list[Layer] | None = Field(
        None,
        max_length=L.LAYERS_MAX,
        description="Result layers; default code, ast_summary and repo_doc "
        "(md_collection with collection).",
    )
    top_k: StrictInt | None = Field(
        None, ge=L.TOP_K_MIN, le=L.TOP_K_MAX, description="Results to return."
    )
    snippet_chars: StrictInt | None = Field(
        None,
        ge=SNIPPET_MIN,
        le=SNIPPET_MAX,
        description="Most characters of each snippet (default "
        f"{SNIPPET_DEFAULT}), cut at line boundaries where possible: a preview; read the "
        "range for more.",
    )
    include_graph: StrictBool | None = Field(
        None, description="Add callers, callees and containers (repository-scoped queries)."
    )
    as_of: datetime | None = Field(None, description="Only content that existed at this time.")
    since: datetime | None = Field(None, description="Only content changed after this time.")
    until: datetime | None = Field(None, description="Only content changed before this time.")
    max_tokens: StrictInt | None = Field(
        None,
        ge=L.MAX_TOKENS_MIN,
        le=L.MAX_TOKENS_MAX,
        description="A hard budget in tokens (cl100k_base) for the whole JSON answer: the best "
        "results that fit, overlapping ranges of a file merged; the answer gives tokens "
        "(what it holds) and omitted (results left out), and when no result fits, "
        "first_result_tokens (the smallest budget that holds the first).",
    )
    verbose: StrictBool | None = Field(
        None,
        description="Full results (ids, stores, layers, provenance, per-stream scores, "
        "timings); compact (location, name, kind, short commit, snippet, score, "
        "confidence) otherwise.",
    )
    explain: StrictBool | None = Field(
        None,
        description="Say why each result ranks where it does: the query's class and what "
        "each ranking stage did (explanation), and per result its streams' ranks and raw "
        "scores and each stage's rank and score before and after (stages). Counted in "
        "tokens.",
    )
    notes: StrictBool | None = Field(
        None,
        description="Show, on each code result, the commons' notes anchored to it "
        "(notes: id, title, score, status), counted in max_tokens; default true, false "
        "skips the commons.",
    )
    skip_stages: list[L.RankingStage] | None = Field(
        None,
        max_length=len(L.SKIPPABLE_STAGES),
        description="Rank without these stages (evaluation: one stage's ablation per "
        "request); explain lists what each did.",
    )


class GraphRequest(Body):
    """A symbol's definitions in one repository with callers, callees and parents."""

    repo: Slug
    symbol: Symbol


FilePath = Annotated[str, _len(L.PATH_MAX_CHARS), _CLEAN]
Cursor = Annotated[str, _len(L.CURSOR_MAX_CHARS, 0), _CLEAN]


class ReadRequest(Body):
    """Lines of one indexed file (or collection document) at the indexed commit."""

    repo: Slug | None = Field(None, description="The repository (host/owner/name).")
    ref: RefName | None = Field(
        None, description="Read this indexed ref (branch or tag) of repo instead of its default."
    )
    collection: Name | None = Field(None, description="Or the collection.")
    path: FilePath = Field(description="The path as indexed, relative, '/'-separated.")
    start_line: StrictInt | None = Field(None, ge=1, description="First line, 1-based.")
    end_line: StrictInt | None = Field(
        None,
        ge=1,
        description=f"Last line, inclusive; one answer holds at most {L.READ_MAX_LINES} "
        f"lines and {L.READ_MAX_CHARS} characters, next_start_line says where to go on.",
    )

    notes: StrictBool | None = Field(
        None,
        description="Show the commons' notes anchored to code overlapping the lines "
        "returned; default true.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ReadRequest:
        if (self.repo is None) == (self.collection is None):
            raise ValueError("give exactly one of repo or collection")
        return self


class GrepRequest(Body):
    """Lines of indexed files matching a literal or a regular expression: in one repository,
    or in every repository the key may read when repo is omitted."""

    repo: Slug | None = Field(
        None, description="The repository; every readable one when omitted (each match names it)."
    )
    ref: RefName | None = Field(
        None, description="Grep this indexed ref (branch or tag) of repo; needs repo."
    )
    pattern: Annotated[str, _len(L.GREP_PATTERN_MAX_CHARS), _CLEAN] = Field(
        description="The text to find, or a POSIX regular expression (PostgreSQL's dialect) "
        "with regex. An embedded option such as (?i) is refused: use case_insensitive."
    )
    regex: StrictBool = False
    case_insensitive: StrictBool = Field(
        False, description="Letters match either case (literal and regular expression alike)."
    )
    path_glob: Annotated[str, _len(L.GREP_GLOB_MAX_CHARS, 0), _CLEAN] | None = Field(
        None, description="Only paths matching this glob (* and ? match '/' too)."
    )
    limit: StrictInt | None = Field(
        None,
        ge=L.GREP_LIMIT_MIN,
        le=L.GREP_LIMIT_MAX,
        description=f"Matching lines to return, across every repository searched (default "
        f"{L.GREP_LIMIT_DEFAULT}).",
    )
    context: StrictInt | None = Field(
        None,
        ge=L.GREP_CONTEXT_MIN,
        le=L.GREP_CONTEXT_MAX,
        description=f"Lines before and after each match (before, after; default 0). One "
        f"answer holds at most {L.GREP_ANSWER_LINES_MAX} lines, context included: past "
        "that, fewer matches than limit and truncated.",
    )


class ReferencesRequest(Body):
    """A symbol's definitions and the places that refer to them, paged."""

    repo: Slug
    ref: RefName | None = Field(None, description="An indexed ref (branch or tag) of repo.")
    symbol: Symbol
    cursor: Cursor | None = Field(None, description="next_cursor of the previous page.")
    limit: StrictInt | None = Field(
        None,
        ge=L.REFERENCES_LIMIT_MIN,
        le=L.REFERENCES_LIMIT_MAX,
        description=f"References per page (default {L.REFERENCES_LIMIT_DEFAULT}).",
    )
    notes: StrictBool | None = Field(
        None,
        description="Show, on each reference, the commons' notes anchored to the symbol "
        "holding it; default true.",
    )


class FilesRequest(Body):
    """A repository's indexed files under a prefix, by path, paged."""

    repo: Slug
    ref: RefName | None = None
    prefix: Annotated[str, _len(L.PATH_MAX_CHARS, 0), _CLEAN] = ""
    cursor: Cursor | None = None
    limit: StrictInt | None = Field(None, ge=L.FILES_LIMIT_MIN, le=L.FILES_LIMIT_MAX)


class RouteRequest(Body):
    """Which repositories and collections a question belongs to (the router)."""

    query: Annotated[RouteQuery, AfterValidator(_not_blank)]
    max_repositories: StrictInt | None = Field(None, ge=L.ROUTE_RESULTS_MIN, le=L.ROUTE_RESULTS_MAX)
    max_collections: StrictInt | None = Field(None, ge=L.ROUTE_RESULTS_MIN, le=L.ROUTE_RESULTS_MAX)


class IndexRepositoryRequest(Body):
    """Index a local path or git URL as a background job."""

    source: Annotated[str, _len(L.SOURCE_MAX_CHARS), _CLEAN]
    slug: Slug | None = None
    branch: Annotated[str, _len(L.BRANCH_MAX_CHARS, 0), _CLEAN] | None = None
    public: StrictBool = False
    grant_principal_ids: list[Name] = Field(default_factory=list, max_length=L.GRANTS_MAX)


class IndexRefRequest(Body):
    """Index a branch or tag of an indexed repository, as its own searchable snapshot."""

    ref: RefName = Field(
        description="A branch or tag name the repository's source has (not refs/..., not a commit)."
    )


class DocumentIn(Body):
    path: Annotated[str, _len(L.DOCUMENT_PATH_MAX_CHARS), _CLEAN]
    content: Text


class IndexCollectionRequest(Body):
    """Index a markdown collection from a server directory or from uploaded documents."""

    name: Name
    description: Annotated[str, _len(L.COLLECTION_DESCRIPTION_MAX_CHARS, 0), _CLEAN] = ""
    directory: Annotated[str, _len(L.SOURCE_MAX_CHARS, 0), _CLEAN] | None = None
    documents: list[DocumentIn] = Field(default_factory=list, max_length=L.DOCUMENTS_MAX)
    public: StrictBool = False
    grant_principal_ids: list[Name] = Field(default_factory=list, max_length=L.GRANTS_MAX)


AnchorLine = Annotated[int, Field(strict=True, ge=1, le=L.ANCHOR_LINE_MAX)]


class SymbolAnchor(Body):
    """An anchor on a symbol: `{repo, symbol}`, optionally narrowed to a file."""

    repo: Slug = Field(description="host/owner/name of an indexed repository you may read.")
    symbol: Symbol = Field(description="A qualified name, or a bare name only one symbol has.")
    path: FilePath | None = Field(None, description="Only the symbol of that name in this file.")


class LinesAnchor(Body):
    """An anchor on a line range: the smallest symbol covering it."""

    repo: Slug = Field(description="host/owner/name of an indexed repository you may read.")
    path: FilePath = Field(description="The file, as indexed.")
    start_line: AnchorLine = Field(description="The range's first line (1-based).")
    end_line: AnchorLine = Field(description="The range's last line (inclusive).")

    @model_validator(mode="after")
    def _ordered(self) -> LinesAnchor:
        if self.end_line < self.start_line:
            raise ValueError("end_line: must not be before start_line")
        if self.end_line - self.start_line + 1 > L.ANCHOR_LINES_MAX:
            raise ValueError(f"a range of at most {L.ANCHOR_LINES_MAX} lines")
        return self


# Code a note is about: `{repo, symbol}` or `{repo, path, start_line, end_line}`.
AnchorTarget = SymbolAnchor | LinesAnchor


class NewPost(Body):
    title: PostTitle = Field(description="One line stating the lesson.")
    body: PostBody
    tags: list[Tag] = Field(default_factory=list, max_length=L.POST_TAGS_MAX)
    anchors: list[AnchorTarget] = Field(
        default_factory=list,
        max_length=L.ANCHORS_PER_POST_MAX,
        description="Code the note is about, in repositories you may read; each is resolved "
        "now and re-checked whenever its repository is indexed again.",
    )


class NewAnchors(Body):
    """Anchors for a posted note (POST /v1/posts/{id}/anchors)."""

    anchors: list[AnchorTarget] = Field(
        min_length=1,
        max_length=L.ANCHORS_PER_POST_MAX,
        description="The note holds at most ANCHORS_PER_POST_MAX anchors in all.",
    )


class AnchorListRequest(Body):
    """The review listing (GET /v1/anchors, MCP commons_anchors)."""

    repo: Slug = Field(description="host/owner/name of a repository you may read.")
    status: L.AnchorStatus | None = Field(
        None, description="Only anchors with this status; unset: every status but fresh."
    )
    limit: StrictInt = Field(
        L.ANCHORS_LIMIT_DEFAULT,
        ge=L.ANCHORS_LIMIT_MIN,
        le=L.ANCHORS_LIMIT_MAX,
        description="Anchors per answer.",
    )


class Vote(Body):
    direction: Literal["up", "down", "none"] = Field(
        description="up (+1), down (-1), or none to withdraw your vote."
    )


class NewComment(Body):
    body: Annotated[str, _len(L.COMMENT_MAX_CHARS), _CLEAN]


class PostSearchRequest(Body):
    """A note search (GET /v1/search, MCP commons_search), optionally scoped to the notes
    anchored in a repository, under a path or on a symbol there."""

    query: CommonsQuery = Field(description='The query; "quoted phrases" must appear literally.')
    repo: Slug | None = Field(
        None,
        description="Only notes anchored to code in this repository (host/owner/name), which "
        "you must be able to read.",
    )
    path: FilePath | None = Field(
        None,
        description="With repo: only notes anchored in this file or under this directory, "
        "where the code is now.",
    )
    symbol: Symbol | None = Field(
        None,
        description="With repo: only notes anchored to this symbol, by qualified name or a "
        "dotted suffix of it (refund, Ledger.refund).",
    )

    @model_validator(mode="after")
    def _scoped(self) -> PostSearchRequest:
        if (self.path or self.symbol) and not self.repo:
            raise ValueError("repo: required with path or symbol")
        return self


class PostListRequest(Body):
    """One page of the note listing (GET /v1/posts, MCP commons_recent)."""

    sort: L.PostSort = Field("new", description="new: newest first; top: highest score first.")
    tag: Tag | None = Field(None, description="Only notes with this tag.")
    cursor: Cursor | None = Field(None, description="next_cursor of the previous page.")
    limit: StrictInt = Field(
        L.POSTS_LIMIT_DEFAULT,
        ge=L.POSTS_LIMIT_MIN,
        le=L.POSTS_LIMIT_MAX,
        description="Notes per page.",
    )


DisplayName = Annotated[str, _len(L.DISPLAY_NAME_MAX_CHARS, 0), _CLEAN]


class NewDisplayName(Body):
    """The name shown beside the caller's contributor number; blank or null clears it."""

    display_name: DisplayName | None = Field(
        description="Trimmed; no control or format characters; unique ignoring case; "
        "not a reserved name nor one that reads as a contributor number."
    )


ModerationReason = Annotated[str, _len(L.MODERATION_REASON_MAX_CHARS), _CLEAN]


class Moderation(Body):
    """Why an admin hides or unhides a note or comment; kept in the moderation log."""

    reason: Annotated[ModerationReason, AfterValidator(_not_blank)] = Field(
        description="Why, for the moderation log (e.g. spam, prompt injection)."
    )


KeyName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=L.KEY_NAME_MAX_CHARS, pattern=L.KEY_NAME_PATTERN),
]


class NewKey(Body):
    """A new API key; the secret is returned once and stored only as a hash."""

    name: KeyName = Field(description="A label for the key, e.g. ci-bot.")
    principal_id: KeyName | None = Field(
        None, description="Who the key acts for; defaults to the name."
    )
    admin: StrictBool = Field(False, description="Admins read everything and manage keys.")
    existing_principal: StrictBool = Field(
        False,
        description="Add a key for a principal that already has one (rotation). Without it a "
        "principal another key has is refused (409 principal_exists); with it the principal "
        "must exist and the new key must have its admin flag (409 principal_admin_mismatch).",
    )
    grant_repositories: list[Slug] = Field(default_factory=list, max_length=L.GRANTS_MAX)
    grant_collections: list[Name] = Field(default_factory=list, max_length=L.GRANTS_MAX)

    @model_validator(mode="after")
    def _not_reserved(self) -> NewKey:
        # A key named `admin` would act for the principal `admin` (the name is the default
        # principal), and so author, and delete, as the operator in the commons.
        for field, value in (("name", self.name), ("principal_id", self.principal_id)):
            if value is not None and value.lower() in L.RESERVED_PRINCIPALS:
                raise ValueError(
                    f"{field}: {value!r} is reserved (reserved: "
                    f"{', '.join(sorted(L.RESERVED_PRINCIPALS))})"
                )
        return self

    @property
    def principal(self) -> str:
        """Who the key acts for: principal_id, else the name."""
        return self.principal_id or self.name


class AccessTarget(Body):
    """Exactly one of a repository or a collection."""

    repository: Annotated[
        Slug | None, Field(description="A repository slug (host/owner/name).")
    ] = None
    collection: Annotated[Name | None, Field(description="A collection name.")] = None

    @model_validator(mode="after")
    def _one_target(self) -> AccessTarget:
        if (self.repository is None) == (self.collection is None):
            raise ValueError("give exactly one of repository or collection")
        return self

    def target(self) -> dict[str, str]:
        if self.repository is not None:
            return {"repository": self.repository}
        assert self.collection is not None
        return {"collection": self.collection}


class AccessGrant(AccessTarget):
    """Read or write access for one principal to one repository or collection (admin only)."""

    principal_id: KeyName = Field(description="The principal an API key acts for.")
    role: Literal["read", "write"] = Field(
        default="read",
        description="read: search and read it; write: also re-index it and change its "
        "source. Revoking write lowers a write grant to read; revoking read removes it.",
    )


class Visibility(AccessTarget):
    """Make a repository or collection public (every key reads it) or private (admin only)."""

    public: StrictBool


def clean_text(value: str, field: str) -> str:
    """The same text checks as the body models, for query strings and path parameters."""
    try:
        return _clean(value)
    except ValueError as err:
        raise invalid(f"{field}: {err}") from None

"""Request bodies and their limits, checked before any backend is called.

The limits here are coarse guards (types, ranges, sizes); each service still enforces its
own precise rules and its INVALID_ARGUMENT comes back as a 400 naming the field. Unknown
fields are rejected so a typo'd option never silently does nothing.
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

from gateway.errors import invalid


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
Query = Annotated[str, StringConstraints(min_length=1, max_length=4000), AfterValidator(_clean)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_clean)]
Slug = Annotated[str, StringConstraints(min_length=1, max_length=300), AfterValidator(_clean)]
Layer = Literal["code", "ast", "ast_summary", "repo_doc", "md_collection"]
StrictInt = Annotated[int, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]

LAYERS: tuple[str, ...] = ("code", "ast", "ast_summary", "repo_doc", "md_collection")
SNIPPET_MIN, SNIPPET_MAX, SNIPPET_DEFAULT = 80, 4000, 600
TOP_K_MAX = 100


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class SearchRequest(Body):
    """Hybrid code and documentation search (spec: Retrieval)."""

    query: Annotated[Query, AfterValidator(_not_blank)] = Field(
        description="What to look for: a symbol, a signature fragment or a question."
    )
    repo: Slug | None = Field(None, description="Scope to one repository (host/owner/name).")
    collection: Name | None = Field(None, description="Search one markdown collection instead.")
    layers: list[Layer] | None = Field(
        None,
        max_length=5,
        description="Result layers; default code, ast_summary and repo_doc "
        "(md_collection with collection).",
    )
    top_k: StrictInt | None = Field(None, ge=1, le=TOP_K_MAX, description="Results to return.")
    snippet_chars: StrictInt | None = Field(
        None, ge=SNIPPET_MIN, le=SNIPPET_MAX, description="Snippet width in characters."
    )
    include_graph: StrictBool | None = Field(
        None, description="Add callers, callees and containers (repository-scoped queries)."
    )
    as_of: datetime | None = Field(None, description="Only content that existed at this time.")
    since: datetime | None = Field(None, description="Only content changed after this time.")
    until: datetime | None = Field(None, description="Only content changed before this time.")


class GraphRequest(Body):
    """A symbol's definitions in one repository with callers, callees and parents."""

    repo: Slug
    symbol: Annotated[str, StringConstraints(min_length=1, max_length=500), AfterValidator(_clean)]


class RouteRequest(Body):
    """Which repositories and collections a question belongs to (spec: Source routing)."""

    query: Annotated[Query, AfterValidator(_not_blank)]
    max_repositories: StrictInt | None = Field(None, ge=1, le=20)
    max_collections: StrictInt | None = Field(None, ge=1, le=20)


class IndexRepositoryRequest(Body):
    """Index a local path or git URL as a background job."""

    source: Annotated[str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_clean)]
    slug: Slug | None = None
    branch: Annotated[str, StringConstraints(max_length=255), AfterValidator(_clean)] | None = None
    public: StrictBool = False
    grant_principal_ids: list[Name] = Field(default_factory=list, max_length=1000)


class DocumentIn(Body):
    path: Annotated[str, StringConstraints(min_length=1, max_length=1024), AfterValidator(_clean)]
    content: Text


class IndexCollectionRequest(Body):
    """Index a markdown collection from a server directory or from uploaded documents."""

    name: Name
    description: Annotated[str, StringConstraints(max_length=4000), AfterValidator(_clean)] = ""
    directory: Annotated[str, StringConstraints(max_length=4096), AfterValidator(_clean)] | None = (
        None
    )
    documents: list[DocumentIn] = Field(default_factory=list, max_length=100_000)
    public: StrictBool = False
    grant_principal_ids: list[Name] = Field(default_factory=list, max_length=1000)


class NewPost(Body):
    title: Annotated[str, StringConstraints(max_length=10_000), AfterValidator(_clean)]
    body: Annotated[str, StringConstraints(max_length=1_000_000), AfterValidator(_clean)]
    tags: list[Annotated[str, StringConstraints(max_length=200), AfterValidator(_clean)]] = Field(
        default_factory=list, max_length=100
    )


class Vote(Body):
    direction: Literal["up", "down", "none"] = Field(
        description="up (+1), down (-1), or none to withdraw your vote."
    )


class NewComment(Body):
    body: Annotated[str, StringConstraints(max_length=1_000_000), AfterValidator(_clean)]


KeyName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@:\-]*$"),
]


class NewKey(Body):
    """A new API key; the secret is returned once and stored only as a hash."""

    name: KeyName = Field(description="A label for the key, e.g. ci-bot.")
    principal_id: KeyName | None = Field(
        None, description="Who the key acts for; defaults to the name."
    )
    admin: StrictBool = Field(False, description="Admins read everything and manage keys.")
    grant_repositories: list[Slug] = Field(default_factory=list, max_length=1000)
    grant_collections: list[Name] = Field(default_factory=list, max_length=1000)


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
    """Read access for one principal to one repository or collection (admin only)."""

    principal_id: KeyName = Field(description="The principal an API key acts for.")


class Visibility(AccessTarget):
    """Make a repository or collection public (every key reads it) or private (admin only)."""

    public: StrictBool


def clean_text(value: str, field: str) -> str:
    """The same text checks as the body models, for query strings and path parameters."""
    try:
        return _clean(value)
    except ValueError as err:
        raise invalid(f"{field}: {err}") from None

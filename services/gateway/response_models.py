"""What each REST route answers, as models for the OpenAPI document.

Most answers are a backend reply through proto_json.to_json: their models are derived from
the .proto (gateway.proto_models), so they cannot fall behind the contract. The rest are
written here: the compact search answer (cograph_api.search_forms), API keys, health.

The models document; they do not filter. Routes send the JSON they built (a search answer's
`tokens` counts exactly the text sent, which re-serialising through a model would change),
and tests validate real answers against these models instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cograph.common.v1 import common_pb2
from cograph.commons.v1 import commons_pb2
from cograph.retrieval.v1 import retrieval_pb2
from cograph.router.v1 import router_pb2
from gateway.proto_models import ProtoModels

_derive = ProtoModels().model

# ---- retrieval ----
Job = _derive(retrieval_pb2.Job.DESCRIPTOR)
Repository = _derive(retrieval_pb2.Repository.DESCRIPTOR)
RepositoryList = _derive(retrieval_pb2.ListRepositoriesResponse.DESCRIPTOR)
RefList = _derive(retrieval_pb2.ListRefsResponse.DESCRIPTOR)
CollectionList = _derive(retrieval_pb2.ListCollectionsResponse.DESCRIPTOR)
VerboseSearchAnswer = _derive(retrieval_pb2.SearchResponse.DESCRIPTOR)
Graph = _derive(retrieval_pb2.Graph.DESCRIPTOR)
SearchExplanation = _derive(retrieval_pb2.SearchExplanation.DESCRIPTOR)
GraphAnswer = _derive(retrieval_pb2.GraphResponse.DESCRIPTOR)
ReadAnswer = _derive(retrieval_pb2.ReadFileResponse.DESCRIPTOR)
FilesAnswer = _derive(retrieval_pb2.ListFilesResponse.DESCRIPTOR)
OutlineAnswer = _derive(retrieval_pb2.OutlineResponse.DESCRIPTOR)
GrepAnswer = _derive(retrieval_pb2.GrepResponse.DESCRIPTOR)
ReferencesAnswer = _derive(retrieval_pb2.ReferencesResponse.DESCRIPTOR)
CodeNote = _derive(common_pb2.CodeNote.DESCRIPTOR)
# ---- router ----
RouteAnswer = _derive(router_pb2.RouteResponse.DESCRIPTOR)
# ---- commons ----
Post = _derive(commons_pb2.Post.DESCRIPTOR)
VoteAnswer = _derive(commons_pb2.VotePostResponse.DESCRIPTOR)
CommentAnswer = _derive(commons_pb2.CreateCommentResponse.DESCRIPTOR)
CommentList = _derive(commons_pb2.ListCommentsResponse.DESCRIPTOR)
PostSearchAnswer = _derive(commons_pb2.SearchPostsResponse.DESCRIPTOR)
PostHidden = _derive(commons_pb2.SetPostHiddenResponse.DESCRIPTOR)
CommentHidden = _derive(commons_pb2.SetCommentHiddenResponse.DESCRIPTOR)
ModerationLog = _derive(commons_pb2.ListModerationLogResponse.DESCRIPTOR)
PostList = _derive(commons_pb2.ListPostsResponse.DESCRIPTOR)
Profile = _derive(commons_pb2.Profile.DESCRIPTOR)
Anchor = _derive(commons_pb2.Anchor.DESCRIPTOR)
AnchorList = _derive(commons_pb2.ListAnchorsResponse.DESCRIPTOR)

ConfidenceLevel = Literal["low", "medium", "high"]


class Written(BaseModel):
    """Base of the models written here: like the derived ones, unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class StreamRank(Written):
    """Where one stream ranked a result (only in answers to `explain`)."""

    stream: str = Field(description="vector, lexical or symbol.")
    rank: int = Field(description="The result's rank in that stream, 1-based.")
    score: float = Field(description="The stream's raw score, 4 significant digits.")


class StageChange(Written):
    """What one ranking stage did to a result (only in answers to `explain`)."""

    stage: str = Field(description="The ranking stage.")
    rank_before: int | None = Field(None, description="Its rank before; absent when it entered.")
    score_before: float | None = Field(None, description="Its score before the stage.")
    rank_after: int = Field(description="Its rank after the stage.")
    score_after: float = Field(description="Its score after the stage.")


class CompactResult(Written):
    """One result of a compact answer: where it is and what it says."""

    location: str = Field(description="path:start-end, lines 1-based and inclusive.")
    repo: str | None = Field(None, description="Its repository, when results differ in source.")
    ref: str | None = Field(None, description="Its indexed ref, when not the default branch.")
    collection: str | None = Field(None, description="Its collection, for documents.")
    commit: str | None = Field(None, description="Its commit, 12 characters.")
    qualified_name: str | None = Field(None, description="The symbol's qualified name.")
    kind: str = Field(description="function, method, class, doc_chunk, ...")
    snippet: str = Field(description="The text, cut at snippet_chars on a line boundary.")
    truncated: bool | None = Field(None, description="Present (true) when the snippet was cut.")
    score: float = Field(description="The fused score, 4 significant digits.")
    confidence: ConfidenceLevel | None = Field(
        None, description="How strongly its streams' evidence supports it."
    )
    notes: list[CodeNote] | None = Field(  # type: ignore[valid-type]
        None, description="The commons' notes anchored to this code, best first; absent if none."
    )
    streams: list[StreamRank] | None = Field(None, description="With explain: each stream's rank.")
    stages: list[StageChange] | None = Field(None, description="With explain: each stage's effect.")


class DegradedStreams(Written):
    """The streams that could not run for this answer (present only when one could not)."""

    vector: Literal["unavailable"] | None = Field(None, description="The vector stream.")
    lexical: Literal["unavailable"] | None = Field(None, description="The lexical stream.")
    symbol: Literal["unavailable"] | None = Field(None, description="The symbol stream.")
    reasons: dict[str, str] | None = Field(None, description="Why, by stream.")


class CompactSearchAnswer(Written):
    """A search answer in its compact form (the default; `verbose` gives the full one)."""

    query: str = Field(description="The query as asked.")
    repo: str | None = Field(None, description="The repository every result comes from.")
    ref: str | None = Field(None, description="Its indexed ref, when not the default branch.")
    collection: str | None = Field(None, description="The collection every result comes from.")
    commit: str | None = Field(None, description="The commit every result comes from (short).")
    results: list[CompactResult] = Field(description="Best first.")
    tokens: int = Field(description="Tokens (cl100k_base) of this answer as sent.")
    omitted: int = Field(description="Results left out to stay within max_tokens.")
    first_result_tokens: int | None = Field(
        None, description="When no result fits max_tokens: the smallest budget that holds one."
    )
    confidence: ConfidenceLevel | None = Field(None, description="The first result's confidence.")
    no_good_answer: bool | None = Field(
        None, description="Present (true) when no result is above low confidence."
    )
    notes_reason: str | None = Field(
        None, description="Present when results may lack their notes: commons_unavailable."
    )
    streams: DegradedStreams | None = Field(None, description="Streams that did not run.")
    graph: Graph | None = Field(None, description="With include_graph: the results' neighbours.")  # type: ignore[valid-type]
    explanation: SearchExplanation | None = Field(  # type: ignore[valid-type]
        None, description="With explain: the query's class and what each stage did."
    )


class JobAnswer(Written):
    """The indexing job a request started (or joined: one job per target at a time)."""

    job: Job = Field(description="The job, queued or already running; poll /api/jobs/{id}.")  # type: ignore[valid-type]


class Changed(Written):
    """Whether an access change changed anything."""

    changed: bool = Field(description="false when it already was so.")


SearchAnswer = CompactSearchAnswer | VerboseSearchAnswer
RefsOrRepository = RefList | Repository


class Key(Written):
    """An API key as listed: never its secret."""

    id: str = Field(description="The key's id (for revocation).")
    name: str = Field(description="Its label.")
    principal_id: str = Field(description="The principal it acts for.")
    admin: bool = Field(description="Whether it is an admin key.")
    key_prefix: str = Field(description="The first characters of the secret, to recognise it.")
    created_at: datetime | None = Field(description="When it was created.")
    last_used_at: datetime | None = Field(description="When it last authenticated a request.")
    revoked_at: datetime | None = Field(description="When it was revoked; null while valid.")


class NewKeyAnswer(Key):
    """A created key, with its secret: shown this once, only a hash is kept."""

    key: str = Field(description="The secret, for `Authorization: Bearer <key>`.")


class KeyList(Written):
    """Every key, without secrets."""

    keys: list[Key] = Field(description="The keys, revoked ones included.")


class Health(Written):
    """The process answers."""

    status: Literal["ok"] = Field(description="Always ok.")


class Readiness(Written):
    """Each dependency's health and the gateway's state."""

    status: Literal["ready", "degraded", "not_ready"] = Field(
        description="ready and degraded answer 200, not_ready 503."
    )
    dependencies: dict[str, str] = Field(
        description="Each dependency: serving, or what its check found."
    )
    detail: str | None = Field(None, description="What is down, in words.")
    degraded: list[str] | None = Field(None, description="The optional dependencies down.")
    embedding_model_mismatch: list[str] | None = Field(
        None, description="Backends whose stored vectors come from another model."
    )
    error: str | None = Field(None, description="unavailable, when not_ready.")

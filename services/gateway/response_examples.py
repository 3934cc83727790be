"""One example answer per REST route, for the OpenAPI document (and so /docs and /redoc).

Answers that are a backend reply are written as that reply (a protobuf message) and turned
into JSON by proto_json, exactly as the gateway does, so an example has every field a real
answer has. tests/unit/test_openapi_document.py validates each against its route's model.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.common.v1 import common_pb2
from cograph.commons.v1 import commons_pb2 as commons
from cograph.retrieval.v1 import retrieval_pb2 as r
from cograph.router.v1 import router_pb2 as router
from cograph_api.proto_json import to_json
from cograph_api.search_forms import compact_search

Json = dict[str, Any]

REPO = "github.com/acme/billing"
COMMIT = "4f9c2b7e1d0a63c5b8e2f1a7d9c4e6b3a1f0c2d8"
POST_ID = "0b6f3c52-8a4e-4d7b-9c1f-2e5a7d8b9c10"
ANCHOR_ID = "6d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
COMMENT_ID = "5d2e8f41-3b7c-4a9e-8d6f-1c2b3a4e5f60"


def _at(text: str) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.fromisoformat(text).replace(tzinfo=UTC))
    return stamp


def _json(message: Message) -> Json:
    return dict(to_json(message))


def _job(state: r.JobState.ValueType = r.JOB_STATE_QUEUED) -> r.Job:
    return r.Job(
        id="7a1d2c3e-4b5f-4a6b-8c7d-9e0f1a2b3c4d",
        kind=r.JOB_KIND_REPOSITORY,
        target=REPO,
        state=state,
        progress=r.JobProgress(phase="queued"),
        created_at=_at("2026-05-01T09:30:00"),
    )


def _repository() -> r.Repository:
    return r.Repository(
        slug=REPO,
        branch="main",
        source="https://github.com/acme/billing.git",
        commit=COMMIT,
        indexed_at=_at("2026-05-01T09:31:12"),
        file_count=412,
        node_count=5230,
        edge_count=11872,
        doc_chunk_count=96,
        files_by_language={"go": 301, "markdown": 38, "yaml": 73},
        head_commit=COMMIT,
        freshness=r.FRESHNESS_CURRENT,
        last_checked_at=_at("2026-05-01T10:00:00"),
    )


def _note() -> common_pb2.CodeNote:
    return common_pb2.CodeNote(
        id=POST_ID,
        title="Next must stop at MaxAttempts, or a declined card is charged forever",
        score=4,
        status="fresh",
    )


def _result() -> r.SearchResult:
    return r.SearchResult(
        id="code:9f2c",
        layer=r.LAYER_CODE,
        store=r.STORE_CODE,
        repo=REPO,
        path="internal/charge/retry.go",
        qualified_name="charge.RetryPolicy.Next",
        kind="method",
        start_line=41,
        end_line=58,
        commit=COMMIT,
        snippet="func (p *RetryPolicy) Next(attempt int) (time.Duration, bool) {",
        score=0.0325,
        provenance=[
            r.Provenance(stream=r.STREAM_SYMBOL, rank=1, score=0.91),
            r.Provenance(stream=r.STREAM_VECTOR, rank=2, score=0.62),
        ],
        language="go",
        confidence=r.CONFIDENCE_HIGH,
        notes=[_note()],
    )


def _search() -> Json:
    answer = r.SearchResponse(
        query="how does billing retry a failed charge",
        results=[_result()],
        streams=r.StreamStatuses(
            vector=r.STREAM_STATUS_OK, lexical=r.STREAM_STATUS_OK, symbol=r.STREAM_STATUS_OK
        ),
        timings_ms={"vector": 18.2, "lexical": 6.1, "symbol": 3.4, "total": 31.0},
        tokens=212,
        confidence=r.CONFIDENCE_HIGH,
    )
    return _json(answer)


def _commons_post() -> commons.Post:
    return commons.Post(
        id=POST_ID,
        contributor_no=3,
        title="Sign-up lives in auth/signup.tsx",
        body="never add a second registration form; extend the one in auth/signup.tsx",
        tags=["auth"],
        score=2,
        created_at=_at("2026-04-30T16:05:00"),
        searchable=True,
        author_name="billing-bot",
        anchors=[_anchor()],
    )


def _anchor(status: commons.AnchorStatus.ValueType = commons.ANCHOR_STATUS_FRESH) -> commons.Anchor:
    anchor = commons.Anchor(
        id=ANCHOR_ID,
        repo="github.com/acme/web",
        symbol="auth.signup.SignupForm",
        qualified_name="auth.signup.SignupForm",
        path="auth/signup.tsx",
        start_line=12,
        end_line=88,
        kind="class",
        status=status,
        commit="3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b",
        checked_commit="3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b",
        checked_at=_at("2026-04-30T16:05:00"),
    )
    if status == commons.ANCHOR_STATUS_MOVED:
        anchor.checked_commit = "9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c"
        anchor.moved_to.CopyFrom(
            commons.AnchorPlace(
                path="auth/forms/signup.tsx",
                qualified_name="auth.forms.signup.SignupForm",
                start_line=5,
                end_line=81,
            )
        )
    return anchor


def _comment() -> commons.Comment:
    return commons.Comment(
        id=COMMENT_ID,
        post_id=POST_ID,
        contributor_no=5,
        body="Still true after the auth refactor.",
        created_at=_at("2026-05-01T08:12:00"),
    )


def _symbol(name: str, kind: str, start: int, end: int, signature: str) -> r.OutlineSymbol:
    return r.OutlineSymbol(
        name=name,
        qualified_name=f"charge.{name}",
        kind=kind,
        signature=signature,
        start_line=start,
        end_line=end,
    )


def _edge(source: str, target: str) -> r.GraphEdge:
    edge = r.GraphEdge(to=target, kind=r.EDGE_KIND_CALLS)
    setattr(edge, "from", source)
    return edge


def _key(**extra: Any) -> Json:
    return {
        "id": "3f2a9c1e-6b8d-4e7f-a1c2-d3e4f5a6b7c8",
        "name": "ci-agent",
        "principal_id": "ci-agent",
        "admin": False,
        "key_prefix": "cg_7Hq2",
        "created_at": "2026-05-01T09:00:00Z",
        "last_used_at": None,
        "revoked_at": None,
        **extra,
    }


_VERBOSE_SEARCH = _search()
_GRAPH = r.Graph(
    nodes=[
        r.GraphNode(
            id="code:9f2c",
            repo=REPO,
            path="internal/charge/retry.go",
            qualified_name="charge.RetryPolicy.Next",
            kind="method",
            start_line=41,
            end_line=58,
            signature="func (p *RetryPolicy) Next(attempt int) (time.Duration, bool)",
        ),
        r.GraphNode(
            id="code:1b7e",
            repo=REPO,
            path="internal/charge/charge.go",
            qualified_name="charge.Charger.Charge",
            kind="method",
            start_line=88,
            end_line=131,
            signature="func (c *Charger) Charge(ctx context.Context, req Request) error",
        ),
    ],
    # `from` is a Python keyword: the edge is filled field by field.
    edges=[_edge("code:1b7e", "code:9f2c")],
)

EXAMPLES: dict[str, Json] = {
    "search": compact_search(_VERBOSE_SEARCH),
    "search_verbose": _VERBOSE_SEARCH,
    "graph": _json(
        r.GraphResponse(
            definitions=[_GRAPH.nodes[0]],
            graph=_GRAPH,
        )
    ),
    "read": _json(
        r.ReadFileResponse(
            repo=REPO,
            path="internal/charge/retry.go",
            commit=COMMIT,
            start_line=41,
            end_line=43,
            total_lines=96,
            content="func (p *RetryPolicy) Next(attempt int) (time.Duration, bool) {\n"
            "\tif attempt >= p.MaxAttempts {\n\t\treturn 0, false\n",
            next_start_line=44,
            language="go",
            notes=[_note()],
        )
    ),
    "files": _json(
        r.ListFilesResponse(
            files=[
                r.IndexedFile(path="internal/charge/charge.go", language="go", size=5120),
                r.IndexedFile(path="internal/charge/retry.go", language="go", size=2210),
            ],
        )
    ),
    "outline": _json(
        r.OutlineResponse(
            repo=REPO,
            path="internal/charge/retry.go",
            commit=COMMIT,
            language="go",
            symbols=[
                r.OutlineSymbol(
                    name="RetryPolicy",
                    qualified_name="charge.RetryPolicy",
                    kind="struct",
                    signature="type RetryPolicy struct",
                    start_line=12,
                    end_line=18,
                    children=[
                        _symbol(
                            "Next",
                            "method",
                            41,
                            58,
                            "func (p *RetryPolicy) Next(attempt int) (time.Duration, bool)",
                        )
                    ],
                )
            ],
        )
    ),
    "grep": _json(
        r.GrepResponse(
            matches=[
                r.GrepMatch(
                    path="internal/charge/retry.go",
                    line=42,
                    text="\tif attempt >= p.MaxAttempts {",
                    repo=REPO,
                )
            ],
            commit=COMMIT,
            commits={REPO: COMMIT},
        )
    ),
    "references": _json(
        r.ReferencesResponse(
            definitions=[_GRAPH.nodes[0]],
            references=[
                r.Reference(
                    path="internal/charge/charge.go",
                    start_line=102,
                    end_line=102,
                    symbol="charge.Charger.Charge",
                    kind=r.EDGE_KIND_CALLS,
                    target="code:9f2c",
                    line=102,
                    notes=[
                        common_pb2.CodeNote(
                            id=ANCHOR_ID,
                            title="Charge retries through RetryPolicy; never loop here",
                            score=1,
                            status="body_changed",
                        )
                    ],
                )
            ],
        )
    ),
    "route": _json(
        router.RouteResponse(
            repositories=[
                router.RoutedRepository(
                    slug=REPO,
                    confidence=0.82,
                    rationale="retry, charge: symbol names and paths in internal/charge",
                )
            ],
            collections=[
                router.RoutedCollection(
                    name="runbooks",
                    confidence=0.21,
                    rationale="charge: one runbook title (weak/fallback)",
                )
            ],
        )
    ),
    "job_answer": {"job": _json(_job())},
    "job": _json(_job(r.JOB_STATE_SUCCEEDED)),
    "repository": _json(_repository()),
    "repositories": {"repositories": [_json(_repository())]},
    "refs": _json(
        r.ListRefsResponse(
            slug=REPO,
            default_branch="main",
            refs=[
                r.IndexedRef(
                    name="release/2.0",
                    kind="branch",
                    commit=COMMIT,
                    indexed_at=_at("2026-05-01T09:40:00"),
                    state="succeeded",
                    file_count=398,
                )
            ],
        )
    ),
    "collections": {
        "collections": [
            _json(
                r.Collection(
                    name="runbooks",
                    description="ops runbooks",
                    document_count=42,
                    chunk_count=310,
                    indexed_at=_at("2026-05-01T09:35:00"),
                )
            )
        ]
    },
    "changed": {"changed": True},
    "post": _json(_commons_post()),
    "anchor": _json(_anchor()),
    "anchor_list": _json(
        commons.ListAnchorsResponse(
            anchors=[
                commons.AnchoredNote(
                    post_id=POST_ID,
                    title="Sign-up lives in auth/signup.tsx",
                    score=2,
                    anchor=_anchor(commons.ANCHOR_STATUS_MOVED),
                )
            ]
        )
    ),
    "vote": _json(
        commons.VotePostResponse(post_id=POST_ID, score=3, direction=commons.VOTE_DIRECTION_UP)
    ),
    "comment": _json(commons.CreateCommentResponse(comment=_comment(), comment_count=1)),
    "comments": _json(commons.ListCommentsResponse(comments=[_comment()])),
    "post_search": _json(
        commons.SearchPostsResponse(
            query="registration form",
            results=[
                commons.SearchResult(
                    id=POST_ID,
                    contributor_no=3,
                    title="Sign-up lives in auth/signup.tsx",
                    body="never add a second registration form; extend the one in ...",
                    body_truncated=True,
                    body_chars=71,
                    tags=["auth"],
                    score=2,
                    created_at=_at("2026-04-30T16:05:00"),
                )
            ],
        )
    ),
    "post_list": _json(
        commons.ListPostsResponse(
            posts=[
                commons.PostSummary(
                    id=POST_ID,
                    contributor_no=3,
                    author_name="billing-bot",
                    title="Sign-up lives in auth/signup.tsx",
                    body="never add a second registration form; extend the one in ...",
                    body_truncated=True,
                    body_chars=71,
                    tags=["auth"],
                    score=2,
                    comment_count=1,
                    created_at=_at("2026-04-30T16:05:00"),
                    searchable=True,
                )
            ],
            next_cursor="c1.WyJwb3N0cyIsWy4uLl1d.8h3k...",
        )
    ),
    "profile": _json(commons.Profile(contributor_no=3, display_name="billing-bot")),
    "post_hidden": _json(commons.SetPostHiddenResponse(post_id=POST_ID, hidden=True, changed=True)),
    "comment_hidden": _json(
        commons.SetCommentHiddenResponse(comment_id=COMMENT_ID, hidden=True, changed=True)
    ),
    "moderation_log": _json(
        commons.ListModerationLogResponse(
            entries=[
                commons.ModerationEntry(
                    id=17,
                    principal_id="admin",
                    action=commons.MODERATION_ACTION_HIDE,
                    target=commons.MODERATION_TARGET_POST,
                    target_id=POST_ID,
                    post_id=POST_ID,
                    target_author="ci-agent",
                    target_excerpt="Sign-up lives in auth/signup.tsx",
                    reason="spam",
                    created_at=_at("2026-05-01T11:00:00"),
                )
            ],
            next_before_id=0,
        )
    ),
    "new_key": _key(key="cg_7Hq2...the whole secret, shown once..."),
    "keys": {"keys": [_key(), _key(name="admin", principal_id="admin", admin=True)]},
    "health": {"status": "ok"},
    "ready": {
        "status": "ready",
        "dependencies": {
            "retrieval": "serving",
            "router": "serving",
            "commons": "serving",
            "database": "serving",
            "embedder": "serving",
        },
    },
    "not_ready": {
        "status": "not_ready",
        "error": "unavailable",
        "detail": "not ready: retrieval",
        "dependencies": {
            "retrieval": "unavailable",
            "router": "serving",
            "commons": "serving",
            "database": "serving",
        },
    },
}

# One example error body per status the gateway answers with.
ERRORS: dict[int, Json] = {
    400: {"error": "invalid_argument", "detail": "query: String should have at least 1 character"},
    401: {"error": "unauthenticated", "detail": "invalid or revoked API key"},
    403: {"error": "permission_denied", "detail": "an admin API key is required"},
    404: {"error": "not_found", "detail": f"no repository {REPO}"},
    409: {"error": "conflict", "detail": f"{REPO} is being indexed"},
    413: {"error": "payload_too_large", "detail": "request body over 4194304 bytes"},
    429: {
        "error": "rate_limited",
        "detail": "rate limited: over 10 requests a second for search requests with this key; "
        "retry after 1 s",
    },
    501: {"error": "not_implemented", "detail": "this backend is not deployed"},
    503: {"error": "unavailable", "detail": "a backend service is unavailable"},
    504: {"error": "deadline_exceeded", "detail": "deadline exceeded"},
    507: {"error": "disk_full", "detail": "the data disk is full"},
}

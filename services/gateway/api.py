"""What the gateway can do, as JSON in and JSON out: the REST routes and the in-gateway MCP
tools both call this, so the two surfaces cannot drift apart.

Each method maps a validated request to protobuf, calls one backend with the caller's
principal in the metadata (set by the auth middleware), and maps the reply back. A failed
call raises ApiError with the HTTP status the gRPC status maps to. Each method first takes
the caller's allowance for its class of work (gateway.quotas), so REST and MCP are limited
alike: a principal over its allowance gets RateLimited (429) before any backend is called.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc
from google.protobuf.message import Message

from cograph.commons.v1 import commons_pb2
from cograph.retrieval.v1 import retrieval_pb2
from cograph.router.v1 import router_pb2
from cograph_api import rest_models as models
from cograph_api.operations import Json
from cograph_api.proto_json import from_json, to_json
from cograph_api.push_hooks import WEBHOOK_PRINCIPAL
from cograph_api.search_forms import answer_form
from gateway.backends import Backends
from gateway.errors import from_grpc, invalid
from gateway.metrics import Metrics
from gateway.quotas import Held, Quotas, Work
from svckit import requestctx

M = TypeVar("M", bound=Message)
P = ParamSpec("P")
R = TypeVar("R")

_ROLES = {
    "read": retrieval_pb2.ACCESS_ROLE_READ,
    "write": retrieval_pb2.ACCESS_ROLE_WRITE,
}
_SORTS = {"new": commons_pb2.POST_SORT_NEW, "top": commons_pb2.POST_SORT_TOP}
_DIRECTIONS = {
    "up": commons_pb2.VOTE_DIRECTION_UP,
    "down": commons_pb2.VOTE_DIRECTION_DOWN,
    "none": commons_pb2.VOTE_DIRECTION_NONE,
}


def _anchor_targets(anchors: Sequence[models.AnchorTarget]) -> list[commons_pb2.AnchorTarget]:
    return [
        commons_pb2.AnchorTarget(repo=a.repo, symbol=a.symbol, path=a.path or "")
        if isinstance(a, models.SymbolAnchor)
        else commons_pb2.AnchorTarget(
            repo=a.repo, path=a.path, start_line=a.start_line, end_line=a.end_line
        )
        for a in anchors
    ]


def _build(cls: type[M], data: Json) -> M:
    try:
        return from_json(cls, data)
    except ValueError as err:
        raise invalid(str(err)) from None


WORK_ATTRIBUTE = "cograph_work"


def work_of(method: Callable[..., Any]) -> Work | None:
    """The class of work a GatewayApi method is @limited with, if any."""
    work = getattr(method, WORK_ATTRIBUTE, None)
    return work if isinstance(work, Work) else None


def limited(
    work: Work,
) -> Callable[
    [Callable[Concatenate[GatewayApi, P], Coroutine[Any, Any, R]]],
    Callable[Concatenate[GatewayApi, P], Coroutine[Any, Any, R]],
]:
    """The method runs within the caller's allowance for `work` (see gateway.quotas)."""

    def wrap(
        method: Callable[Concatenate[GatewayApi, P], Coroutine[Any, Any, R]],
    ) -> Callable[Concatenate[GatewayApi, P], Coroutine[Any, Any, R]]:
        @functools.wraps(method)
        async def run(self: GatewayApi, *args: P.args, **kwargs: P.kwargs) -> R:
            with self._start(work):
                return await method(self, *args, **kwargs)

        # Read by gateway.early_refusal, which refuses over-limit requests before routing.
        setattr(run, WORK_ATTRIBUTE, work)
        return run

    return wrap


class GatewayApi:
    """CographApi (and the rest of the REST surface) over the gRPC backends."""

    def __init__(
        self, backends: Backends, metrics: Metrics | None = None, quotas: Quotas | None = None
    ) -> None:
        self._backends = backends
        self._metrics = metrics
        self._quotas = quotas

    def _start(self, work: Work) -> Held:
        # The principal is the one the auth middleware (REST) or the MCP tool handler set.
        if self._quotas is None:
            return Held(None)
        return self._quotas.start(requestctx.current_principal(), work)

    @staticmethod
    async def _call(method: Callable[[Any], Awaitable[Any]], request: Message) -> Any:
        try:
            return await method(request)
        except grpc.aio.AioRpcError as err:
            raise from_grpc(err) from None

    # ---- code search and routing ----

    @limited(Work.SEARCH)
    async def search(self, request: models.SearchRequest) -> Json:
        # JSON names equal proto field names, so from_json maps the request fields as
        # they are (layer names onto the Layer enum, times onto Timestamps).
        message = _build(retrieval_pb2.SearchRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.retrieval().Search, message)
        answer = dict(to_json(reply))
        if self._metrics is not None:
            # Counted here so REST and MCP answers alike show up in the metric.
            self._metrics.count_degraded_search(answer.get("streams") or {})
        return answer_form(answer, bool(request.verbose))

    @limited(Work.SEARCH)
    async def graph(self, request: models.GraphRequest) -> Json:
        message = _build(retrieval_pb2.GraphRequest, request.model_dump())
        reply = await self._call(self._backends.retrieval().Graph, message)
        return dict(to_json(reply))

    @limited(Work.READ)
    async def read(self, request: models.ReadRequest) -> Json:
        message = _build(retrieval_pb2.ReadFileRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.retrieval().ReadFile, message)
        return dict(to_json(reply))

    @limited(Work.READ)
    async def list_files(self, request: models.FilesRequest) -> Json:
        message = _build(retrieval_pb2.ListFilesRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.retrieval().ListFiles, message)
        return dict(to_json(reply))

    @limited(Work.GREP)
    async def grep(self, request: models.GrepRequest) -> Json:
        message = _build(retrieval_pb2.GrepRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.retrieval().Grep, message)
        return dict(to_json(reply))

    @limited(Work.SEARCH)
    async def references(self, request: models.ReferencesRequest) -> Json:
        message = _build(retrieval_pb2.ReferencesRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.retrieval().References, message)
        return dict(to_json(reply))

    @limited(Work.SEARCH)
    async def route(self, request: models.RouteRequest) -> Json:
        message = _build(router_pb2.RouteRequest, request.model_dump(exclude_none=True))
        reply = await self._call(self._backends.router().Route, message)
        return dict(to_json(reply))

    # ---- repositories, collections, jobs ----

    @limited(Work.INDEX)
    async def index_repository(self, request: models.IndexRepositoryRequest) -> Json:
        message = from_json(retrieval_pb2.IndexRepositoryRequest, request.model_dump())
        reply = await self._call(self._backends.retrieval().IndexRepository, message)
        return {"job": to_json(reply.job)}

    @limited(Work.READ)
    async def list_repositories(self) -> Json:
        reply = await self._call(
            self._backends.retrieval().ListRepositories, retrieval_pb2.ListRepositoriesRequest()
        )
        return {"repositories": [to_json(r) for r in reply.repositories]}

    @limited(Work.READ)
    async def get_repository(self, slug: str) -> Json:
        reply = await self._call(
            self._backends.retrieval().GetRepository, retrieval_pb2.GetRepositoryRequest(slug=slug)
        )
        return dict(to_json(reply.repository))

    @limited(Work.READ)
    async def list_refs(self, slug: str, remote: bool = False) -> Json:
        reply = await self._call(
            self._backends.retrieval().ListRefs,
            retrieval_pb2.ListRefsRequest(slug=slug, remote=remote),
        )
        return dict(to_json(reply))

    @limited(Work.INDEX)
    async def index_ref(self, slug: str, request: models.IndexRefRequest) -> Json:
        reply = await self._call(
            self._backends.retrieval().IndexRef,
            retrieval_pb2.IndexRefRequest(slug=slug, ref=request.ref),
        )
        return {"job": to_json(reply.job)}

    @limited(Work.INDEX)
    async def delete_ref(self, slug: str, ref: str) -> None:
        await self._call(
            self._backends.retrieval().DeleteRef, retrieval_pb2.DeleteRefRequest(slug=slug, ref=ref)
        )

    @limited(Work.INDEX)
    async def delete_repository(self, slug: str) -> None:
        await self._call(
            self._backends.retrieval().DeleteRepository,
            retrieval_pb2.DeleteRepositoryRequest(slug=slug),
        )

    @limited(Work.INDEX)
    async def delete_collection(self, name: str) -> None:
        await self._call(
            self._backends.retrieval().DeleteCollection,
            retrieval_pb2.DeleteCollectionRequest(name=name),
        )

    async def sync_source(self, keys: Sequence[str], branch: str, commit: str) -> Json:
        """A push a webhook verified (gateway.routes_hooks): queues the re-index of the
        repositories it names. Made as the webhook identity, not as a key (the hooks take
        none): retrieval lets no other principal make this call. The hook routes limit
        themselves (Work.HOOKS, per vendor)."""
        token = requestctx.set_principal(requestctx.Principal(WEBHOOK_PRINCIPAL, False))
        try:
            reply = await self._call(
                self._backends.retrieval().SyncSource,
                retrieval_pb2.SyncSourceRequest(urls=list(keys), branch=branch, commit=commit),
            )
        finally:
            requestctx.reset_principal(token)
        return {"queued": list(reply.queued), "up_to_date": list(reply.up_to_date)}

    @limited(Work.READ)
    async def outline(self, repo: str, path: str, ref: str = "") -> Json:
        reply = await self._call(
            self._backends.retrieval().Outline,
            retrieval_pb2.OutlineRequest(repo=repo, path=path, ref=ref),
        )
        return dict(to_json(reply))

    @limited(Work.INDEX)
    async def index_collection(self, request: models.IndexCollectionRequest) -> Json:
        message = from_json(retrieval_pb2.IndexCollectionRequest, request.model_dump())
        reply = await self._call(self._backends.retrieval().IndexCollection, message)
        return {"job": to_json(reply.job)}

    @limited(Work.READ)
    async def list_collections(self) -> Json:
        reply = await self._call(
            self._backends.retrieval().ListCollections, retrieval_pb2.ListCollectionsRequest()
        )
        return {"collections": [to_json(c) for c in reply.collections]}

    @limited(Work.READ)
    async def get_job(self, job_id: str) -> Json:
        reply = await self._call(
            self._backends.retrieval().GetJob, retrieval_pb2.GetJobRequest(job_id=job_id)
        )
        return dict(to_json(reply.job))

    @limited(Work.READ)
    async def grant(self, request: models.AccessGrant) -> Json:
        message = retrieval_pb2.GrantAccessRequest(
            principal_id=request.principal_id, role=_ROLES[request.role], **request.target()
        )
        reply = await self._call(self._backends.retrieval().GrantAccess, message)
        return {"changed": reply.changed}

    @limited(Work.READ)
    async def revoke(self, request: models.AccessGrant) -> Json:
        message = retrieval_pb2.RevokeAccessRequest(
            principal_id=request.principal_id, role=_ROLES[request.role], **request.target()
        )
        reply = await self._call(self._backends.retrieval().RevokeAccess, message)
        return {"changed": reply.changed}

    @limited(Work.READ)
    async def set_visibility(self, request: models.Visibility) -> Json:
        message = retrieval_pb2.SetVisibilityRequest(public=request.public, **request.target())
        reply = await self._call(self._backends.retrieval().SetVisibility, message)
        return {"changed": reply.changed}

    # ---- commons ----

    @limited(Work.NOTES)
    async def create_post(self, request: models.NewPost) -> Json:
        reply = await self._call(
            self._backends.commons().CreatePost,
            commons_pb2.CreatePostRequest(
                title=request.title,
                body=request.body,
                tags=request.tags,
                anchors=_anchor_targets(request.anchors),
            ),
        )
        return dict(to_json(reply.post))

    @limited(Work.NOTES)
    async def add_anchors(self, post_id: str, request: models.NewAnchors) -> Json:
        reply = await self._call(
            self._backends.commons().AddAnchors,
            commons_pb2.AddAnchorsRequest(
                post_id=post_id, anchors=_anchor_targets(request.anchors)
            ),
        )
        return dict(to_json(reply.post))

    @limited(Work.NOTES)
    async def confirm_anchor(self, post_id: str, anchor_id: str) -> Json:
        reply = await self._call(
            self._backends.commons().ConfirmAnchor,
            commons_pb2.ConfirmAnchorRequest(post_id=post_id, anchor_id=anchor_id),
        )
        return dict(to_json(reply.anchor))

    @limited(Work.READ)
    async def list_anchors(self, request: models.AnchorListRequest) -> Json:
        reply = await self._call(
            self._backends.commons().ListAnchors,
            commons_pb2.ListAnchorsRequest(
                repo=request.repo,
                status=commons_pb2.AnchorStatus.Value(f"ANCHOR_STATUS_{request.status.upper()}")
                if request.status
                else commons_pb2.ANCHOR_STATUS_UNSPECIFIED,
                limit=request.limit,
            ),
        )
        return dict(to_json(reply))

    @limited(Work.READ)
    async def get_post(self, post_id: str) -> Json:
        reply = await self._call(
            self._backends.commons().GetPost, commons_pb2.GetPostRequest(post_id=post_id)
        )
        return dict(to_json(reply.post))

    @limited(Work.NOTES)
    async def delete_post(self, post_id: str, reason: str = "") -> None:
        await self._call(
            self._backends.commons().DeletePost,
            commons_pb2.DeletePostRequest(post_id=post_id, reason=reason),
        )

    async def set_post_hidden(self, post_id: str, hidden: bool, reason: str) -> Json:
        reply = await self._call(
            self._backends.commons().SetPostHidden,
            commons_pb2.SetPostHiddenRequest(post_id=post_id, hidden=hidden, reason=reason),
        )
        return dict(to_json(reply))

    async def set_comment_hidden(self, comment_id: str, hidden: bool, reason: str) -> Json:
        reply = await self._call(
            self._backends.commons().SetCommentHidden,
            commons_pb2.SetCommentHiddenRequest(
                comment_id=comment_id, hidden=hidden, reason=reason
            ),
        )
        return dict(to_json(reply))

    @limited(Work.NOTES)
    async def delete_comment(self, comment_id: str, reason: str = "") -> None:
        await self._call(
            self._backends.commons().DeleteComment,
            commons_pb2.DeleteCommentRequest(comment_id=comment_id, reason=reason),
        )

    async def moderation_log(self, limit: int, before_id: int) -> Json:
        reply = await self._call(
            self._backends.commons().ListModerationLog,
            commons_pb2.ListModerationLogRequest(limit=limit, before_id=before_id),
        )
        return dict(to_json(reply))

    @limited(Work.NOTES)
    async def vote(self, post_id: str, request: models.Vote) -> Json:
        reply = await self._call(
            self._backends.commons().VotePost,
            commons_pb2.VotePostRequest(
                post_id=post_id,
                direction=_DIRECTIONS[request.direction],
            ),
        )
        return dict(to_json(reply))

    @limited(Work.NOTES)
    async def create_comment(self, post_id: str, request: models.NewComment) -> Json:
        reply = await self._call(
            self._backends.commons().CreateComment,
            commons_pb2.CreateCommentRequest(post_id=post_id, body=request.body),
        )
        return dict(to_json(reply))

    @limited(Work.READ)
    async def list_comments(self, post_id: str) -> Json:
        reply = await self._call(
            self._backends.commons().ListComments, commons_pb2.ListCommentsRequest(post_id=post_id)
        )
        return dict(to_json(reply))

    @limited(Work.SEARCH)
    async def search_posts(self, request: models.PostSearchRequest) -> Json:
        reply = await self._call(
            self._backends.commons().SearchPosts,
            commons_pb2.SearchPostsRequest(
                query=request.query,
                repo=request.repo or "",
                path=request.path or "",
                symbol=request.symbol or "",
            ),
        )
        return dict(to_json(reply))

    @limited(Work.READ)
    async def list_posts(self, request: models.PostListRequest) -> Json:
        reply = await self._call(
            self._backends.commons().ListPosts,
            commons_pb2.ListPostsRequest(
                sort=_SORTS[request.sort],
                tag=request.tag or "",
                cursor=request.cursor or "",
                limit=request.limit,
            ),
        )
        return dict(to_json(reply))

    @limited(Work.READ)
    async def profile(self) -> Json:
        reply = await self._call(
            self._backends.commons().GetProfile, commons_pb2.GetProfileRequest()
        )
        return dict(to_json(reply.profile))

    @limited(Work.NOTES)
    async def set_display_name(self, request: models.NewDisplayName) -> Json:
        reply = await self._call(
            self._backends.commons().SetDisplayName,
            commons_pb2.SetDisplayNameRequest(display_name=request.display_name or ""),
        )
        return dict(to_json(reply.profile))

"""The commons notes board under /v1: post, search, read, vote on and comment on notes; and
moderation (admin keys only): hide, unhide and delete anyone's note or comment, read the log.

A hidden note is out of search at once and is 404 to everyone but its author and admins;
a hidden comment is left out of its note's comments likewise (commons.board)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import ValidationError

from cograph_api import limits
from cograph_api import rest_models as models
from cograph_api.rest_errors import invalid
from gateway import response_models as R
from gateway.api import GatewayApi
from gateway.responses import answers, errors
from gateway.routes_keys import require_admin

PostId = Annotated[
    str, Path(min_length=1, max_length=limits.ID_MAX_CHARS, description="The note's UUID.")
]
AnchorId = Annotated[
    str, Path(min_length=1, max_length=limits.ID_MAX_CHARS, description="The anchor's UUID.")
]
CommentId = Annotated[
    str, Path(min_length=1, max_length=limits.ID_MAX_CHARS, description="The comment's UUID.")
]
DeleteReason = Annotated[
    str,
    Query(
        max_length=limits.MODERATION_REASON_MAX_CHARS,
        description="Why; required when an admin deletes another author's note or comment "
        "(kept in the moderation log).",
    ),
]


def commons_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["commons"])

    @router.post(
        "/posts",
        status_code=201,
        response_model=None,
        responses=answers(R.Post, "post", 507, status=201, description="The note."),
        summary="Post a note (returns at once)",
    )
    async def create_post(body: models.NewPost) -> dict[str, Any]:
        """Stores the note for the caller; it becomes searchable once embedded."""
        return await api.create_post(body)

    @router.get(
        "/posts",
        response_model=None,
        responses=answers(R.PostList, "post_list"),
        summary="List notes, newest first or by score",
    )
    async def list_posts(
        sort: Annotated[
            limits.PostSort, Query(description="new: newest first; top: highest score first.")
        ] = "new",
        tag: Annotated[
            str, Query(max_length=limits.TAG_MAX_CHARS, description="Only notes with this tag.")
        ] = "",
        cursor: Annotated[
            str,
            Query(
                max_length=limits.CURSOR_MAX_CHARS,
                description="next_cursor of the previous page (same sort and tag).",
            ),
        ] = "",
        limit: Annotated[
            int,
            Query(
                ge=limits.POSTS_LIMIT_MIN, le=limits.POSTS_LIMIT_MAX, description="Notes per page."
            ),
        ] = limits.POSTS_LIMIT_DEFAULT,
    ) -> dict[str, Any]:
        """Bodies are snipped as in search (body_truncated, body_chars). Hidden notes are
        listed to admin keys only. A cursor from another sort or tag, or an edited one, is
        400."""
        request = models.PostListRequest(
            sort=sort,
            tag=models.clean_text(tag, "tag") or None,
            cursor=models.clean_text(cursor, "cursor") or None,
            limit=limit,
        )
        return await api.list_posts(request)

    @router.get(
        "/me",
        response_model=None,
        responses=answers(R.Profile, "profile"),
        summary="Your contributor number and display name",
    )
    async def get_profile() -> dict[str, Any]:
        """Both null until the key's principal first writes to the commons or sets a name."""
        return await api.profile()

    @router.put(
        "/me",
        response_model=None,
        responses=answers(R.Profile, "profile", 409, 507),
        summary="Set or clear your display name",
    )
    async def set_profile(body: models.NewDisplayName) -> dict[str, Any]:
        """Shown as author_name beside contributor_no on notes, comments, search results and
        the listing. 409 display_name_taken when another contributor has it (ignoring case)."""
        return await api.set_display_name(body)

    @router.get(
        "/posts/{post_id}",
        response_model=None,
        responses=answers(R.Post, "post", 404),
        summary="Get a whole note",
    )
    async def get_post(post_id: PostId) -> dict[str, Any]:
        return await api.get_post(post_id)

    @router.delete(
        "/posts/{post_id}",
        status_code=204,
        responses=errors(403, 404),
        summary="Delete a note (its author, or an admin with a reason)",
    )
    async def delete_post(post_id: PostId, reason: DeleteReason = "") -> Response:
        await api.delete_post(post_id, models.clean_text(reason, "reason"))
        return Response(status_code=204)

    @router.post(
        "/posts/{post_id}/anchors",
        response_model=None,
        responses=answers(R.Post, "post", 403, 404, 507),
        summary="Anchor a posted note to code (its author or an admin)",
    )
    async def add_anchors(post_id: PostId, body: models.NewAnchors) -> dict[str, Any]:
        """Each anchor is resolved now, as for POST /v1/posts: a repository you cannot read
        answers 404 like one that does not exist. Returns the whole note."""
        return await api.add_anchors(post_id, body)

    @router.post(
        "/posts/{post_id}/anchors/{anchor_id}/confirm",
        response_model=None,
        responses=answers(R.Anchor, "anchor", 403, 404, 409),
        summary="Confirm an anchor: fresh again at the current commit",
    )
    async def confirm_anchor(post_id: PostId, anchor_id: AnchorId) -> dict[str, Any]:
        """The note's author or an admin, who may read the code. The anchor then points at
        the code as it is now (where it moved to, or the same symbol with its new
        signature or body). 409 when the code is gone (orphaned)."""
        return await api.confirm_anchor(post_id, anchor_id)

    @router.get(
        "/anchors",
        response_model=None,
        responses=answers(R.AnchorList, "anchor_list", 404),
        summary="Notes whose anchored code changed, per repository",
    )
    async def list_anchors(
        repo: Annotated[
            str,
            Query(
                min_length=1,
                max_length=limits.SLUG_MAX_CHARS,
                description="host/owner/name of a repository you may read.",
            ),
        ],
        status: Annotated[
            limits.AnchorStatus | None,
            Query(description="Only anchors with this status; unset: every status but fresh."),
        ] = None,
        limit: Annotated[
            int,
            Query(
                ge=limits.ANCHORS_LIMIT_MIN,
                le=limits.ANCHORS_LIMIT_MAX,
                description="Anchors per answer.",
            ),
        ] = limits.ANCHORS_LIMIT_DEFAULT,
    ) -> dict[str, Any]:
        """For review: each anchor with its note (id, title, score), the longest-changed
        first; only notes you may read. A repository you cannot read is 404, like one that
        does not exist."""
        request = models.AnchorListRequest(
            repo=models.clean_text(repo, "repo"), status=status, limit=limit
        )
        return await api.list_anchors(request)

    @router.post(
        "/posts/{post_id}/votes",
        response_model=None,
        responses=answers(R.VoteAnswer, "vote", 404, 507),
        summary="Vote on a note",
    )
    async def vote(post_id: PostId, body: models.Vote) -> dict[str, Any]:
        return await api.vote(post_id, body)

    @router.post(
        "/posts/{post_id}/comments",
        status_code=201,
        response_model=None,
        responses=answers(R.CommentAnswer, "comment", 404, 507, status=201),
        summary="Comment on a note",
    )
    async def create_comment(post_id: PostId, body: models.NewComment) -> dict[str, Any]:
        return await api.create_comment(post_id, body)

    @router.get(
        "/posts/{post_id}/comments",
        response_model=None,
        responses=answers(R.CommentList, "comments", 404),
        summary="A note's comments",
    )
    async def list_comments(post_id: PostId) -> dict[str, Any]:
        return await api.list_comments(post_id)

    @router.get(
        "/search",
        response_model=None,
        responses=answers(R.PostSearchAnswer, "post_search", 404),
        summary="Search the notes by meaning",
    )
    async def search(
        q: Annotated[
            str,
            Query(
                min_length=1,
                max_length=limits.COMMONS_QUERY_MAX_CHARS,
                description='The query; "quoted phrases" must appear literally.',
            ),
        ],
        repo: Annotated[
            str,
            Query(
                max_length=limits.SLUG_MAX_CHARS,
                description="Only notes anchored to code in this repository (host/owner/name), "
                "which you must be able to read.",
            ),
        ] = "",
        path: Annotated[
            str,
            Query(
                max_length=limits.PATH_MAX_CHARS,
                description="With repo: only notes anchored in this file or under this "
                "directory, where the code is now.",
            ),
        ] = "",
        symbol: Annotated[
            str,
            Query(
                max_length=limits.SYMBOL_MAX_CHARS,
                description="With repo: only notes anchored to this symbol (a qualified name "
                "or a dotted suffix of it).",
            ),
        ] = "",
    ) -> dict[str, Any]:
        """503 semantic_search_unavailable when the query cannot be embedded in time. A scope
        (repo, with path and/or symbol) keeps the notes anchored there; a repository you
        cannot read is 404, like one that does not exist; path or symbol without repo, or a
        path with '..', is 400."""
        try:
            request = models.PostSearchRequest(
                query=models.clean_text(q, "q"),
                repo=models.clean_text(repo, "repo") or None,
                path=models.clean_text(path, "path") or None,
                symbol=models.clean_text(symbol, "symbol") or None,
            )
        except ValidationError as err:
            # The fields passed their Query checks: what is left is the scope's rule.
            raise invalid(
                "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
            ) from None
        return await api.search_posts(request)

    _moderation_routes(router, api)
    return router


def _moderation_routes(router: APIRouter, api: GatewayApi) -> None:
    """Admin-only: the gateway refuses other keys (403) and the commons checks again, since
    the operator's commands reach it directly."""
    admin_only = [Depends(require_admin)]

    @router.post(
        "/posts/{post_id}/hide",
        tags=["moderation"],
        dependencies=admin_only,
        response_model=None,
        responses=answers(R.PostHidden, "post_hidden", 403, 404),
        summary="Hide a note (admin)",
    )
    async def hide_post(post_id: PostId, body: models.Moderation) -> dict[str, Any]:
        """Out of search at once; 404 to everyone but its author and admins. changed is
        false when it already was hidden (nothing is logged then)."""
        return await api.set_post_hidden(post_id, True, body.reason)

    @router.post(
        "/posts/{post_id}/unhide",
        tags=["moderation"],
        dependencies=admin_only,
        response_model=None,
        responses=answers(R.PostHidden, "post_hidden", 403, 404),
        summary="Unhide a note (admin)",
    )
    async def unhide_post(post_id: PostId, body: models.Moderation) -> dict[str, Any]:
        return await api.set_post_hidden(post_id, False, body.reason)

    @router.post(
        "/comments/{comment_id}/hide",
        tags=["moderation"],
        dependencies=admin_only,
        response_model=None,
        responses=answers(R.CommentHidden, "comment_hidden", 403, 404),
        summary="Hide a comment (admin)",
    )
    async def hide_comment(comment_id: CommentId, body: models.Moderation) -> dict[str, Any]:
        return await api.set_comment_hidden(comment_id, True, body.reason)

    @router.post(
        "/comments/{comment_id}/unhide",
        tags=["moderation"],
        dependencies=admin_only,
        response_model=None,
        responses=answers(R.CommentHidden, "comment_hidden", 403, 404),
        summary="Unhide a comment (admin)",
    )
    async def unhide_comment(comment_id: CommentId, body: models.Moderation) -> dict[str, Any]:
        return await api.set_comment_hidden(comment_id, False, body.reason)

    @router.delete(
        "/comments/{comment_id}",
        status_code=204,
        responses=errors(403, 404),
        summary="Delete a comment (its author, or an admin with a reason)",
    )
    async def delete_comment(comment_id: CommentId, reason: DeleteReason = "") -> Response:
        await api.delete_comment(comment_id, models.clean_text(reason, "reason"))
        return Response(status_code=204)

    @router.get(
        "/moderation/log",
        tags=["moderation"],
        dependencies=admin_only,
        response_model=None,
        responses=answers(R.ModerationLog, "moderation_log", 403),
        summary="The moderation log, newest first (admin)",
    )
    async def moderation_log(
        limit: Annotated[
            int,
            Query(
                ge=limits.MODERATION_LOG_LIMIT_MIN,
                le=limits.MODERATION_LOG_LIMIT_MAX,
                description="Entries per page.",
            ),
        ] = limits.MODERATION_LOG_LIMIT_DEFAULT,
        before_id: Annotated[
            int,
            Query(ge=0, le=2**63 - 1, description="The previous page's next_before_id; 0: newest."),
        ] = 0,
    ) -> dict[str, Any]:
        """Who hid, unhid or deleted which note or comment, when and why."""
        return await api.moderation_log(limit, before_id)

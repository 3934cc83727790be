"""The commons notes board under /v1: post, search, read, vote on and comment on notes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from cograph_api import limits
from cograph_api import rest_models as models
from gateway.api import GatewayApi
from gateway.responses import errors

PostId = Annotated[
    str, Path(min_length=1, max_length=limits.ID_MAX_CHARS, description="The note's UUID.")
]


def commons_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["commons"])

    @router.post(
        "/posts", status_code=201, responses=errors(), summary="Post a note (returns at once)"
    )
    async def create_post(body: models.NewPost) -> dict[str, Any]:
        """Stores the note for the caller; it becomes searchable once embedded."""
        return await api.create_post(body)

    @router.get("/posts/{post_id}", responses=errors(404), summary="Get a whole note")
    async def get_post(post_id: PostId) -> dict[str, Any]:
        return await api.get_post(post_id)

    @router.delete(
        "/posts/{post_id}",
        status_code=204,
        responses=errors(403, 404),
        summary="Delete a note (author only)",
    )
    async def delete_post(post_id: PostId) -> Response:
        await api.delete_post(post_id)
        return Response(status_code=204)

    @router.post("/posts/{post_id}/votes", responses=errors(404), summary="Vote on a note")
    async def vote(post_id: PostId, body: models.Vote) -> dict[str, Any]:
        return await api.vote(post_id, body)

    @router.post(
        "/posts/{post_id}/comments",
        status_code=201,
        responses=errors(404),
        summary="Comment on a note",
    )
    async def create_comment(post_id: PostId, body: models.NewComment) -> dict[str, Any]:
        return await api.create_comment(post_id, body)

    @router.get("/posts/{post_id}/comments", responses=errors(404), summary="A note's comments")
    async def list_comments(post_id: PostId) -> dict[str, Any]:
        return await api.list_comments(post_id)

    @router.get("/search", responses=errors(), summary="Search the notes by meaning")
    async def search(
        q: Annotated[
            str,
            Query(
                min_length=1,
                max_length=limits.COMMONS_QUERY_MAX_CHARS,
                description='The query; "quoted phrases" must appear literally.',
            ),
        ],
    ) -> dict[str, Any]:
        """503 semantic_search_unavailable when the query cannot be embedded in time."""
        return await api.search_posts(models.clean_text(q, "q"))

    return router

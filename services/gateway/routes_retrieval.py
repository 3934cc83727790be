"""Code search, source routing, repositories, collections and indexing jobs under /api."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from cograph_api import limits
from cograph_api import rest_models as models
from gateway.api import GatewayApi
from gateway.responses import errors

SlugParam = Annotated[
    str,
    Path(
        min_length=1,
        max_length=limits.SLUG_MAX_CHARS,
        description="host/owner/name (slashes allowed).",
    ),
]
JobId = Annotated[str, Path(min_length=1, max_length=limits.ID_MAX_CHARS)]
CollectionParam = Annotated[
    str, Path(min_length=1, max_length=limits.NAME_MAX_CHARS, description="The collection's name.")
]


def retrieval_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.post("/search", tags=["search"], responses=errors(404, 501, 504))
    async def search(body: models.SearchRequest) -> dict[str, Any]:
        """Hybrid search: symbol, lexical and semantic streams fused with RRF, cited. Each
        result has a confidence (high, medium, low, from its streams' evidence); the answer
        has its first result's and no_good_answer when no result is above low."""
        return await api.search(body)

    @router.post("/graph", tags=["search"], responses=errors(404, 501, 504))
    async def graph(body: models.GraphRequest) -> dict[str, Any]:
        """A symbol's definitions in one repository with its callers, callees and parents."""
        return await api.graph(body)

    @router.post("/read", tags=["read"], responses=errors(404))
    async def read(body: models.ReadRequest) -> dict[str, Any]:
        """Lines of one indexed file (or collection document) as indexed, at the indexed
        commit; at most 2000 lines and 100,000 characters an answer, `next_start_line` says
        where to go on. 404 for a path outside the index or a source the key cannot read."""
        return await api.read(body)

    @router.get("/files", tags=["read"], responses=errors(404))
    async def list_files(
        repo: Annotated[str, Query(min_length=1, max_length=limits.SLUG_MAX_CHARS)],
        prefix: Annotated[str, Query(max_length=limits.PATH_MAX_CHARS)] = "",
        cursor: Annotated[str, Query(max_length=limits.CURSOR_MAX_CHARS)] = "",
        limit: Annotated[
            int | None, Query(ge=limits.FILES_LIMIT_MIN, le=limits.FILES_LIMIT_MAX)
        ] = None,
    ) -> dict[str, Any]:
        """Indexed files (path, language, size in bytes) under `prefix`, by path, paged:
        1000 a page by default (`limit`, at most 5000); `next_cursor` fetches the next."""
        request = models.FilesRequest(
            repo=models.clean_text(repo, "repo"),
            prefix=models.clean_text(prefix, "prefix"),
            cursor=models.clean_text(cursor, "cursor") or None,
            limit=limit,
        )
        return await api.list_files(request)

    @router.get("/outline", tags=["read"], responses=errors(404))
    async def outline(
        repo: Annotated[str, Query(min_length=1, max_length=limits.SLUG_MAX_CHARS)],
        path: Annotated[str, Query(min_length=1, max_length=limits.PATH_MAX_CHARS)],
    ) -> dict[str, Any]:
        """A file's symbols as indexed (kind, signature, lines), nested by containment, in
        line order: what the file holds before reading it. At most 2,000 symbols
        (`truncated` past that); 404 for a file outside the index or a repository the key
        cannot read."""
        return await api.outline(models.clean_text(repo, "repo"), models.clean_text(path, "path"))

    @router.post("/grep", tags=["read"], responses=errors(404, 504))
    async def grep(body: models.GrepRequest) -> dict[str, Any]:
        """Lines of the indexed files matching a literal or a regular expression, by path
        and line; `truncated` when more matched than `limit`. 400 for a bad expression, 504
        when it runs past its time bound."""
        return await api.grep(body)

    @router.post("/references", tags=["search"], responses=errors(404))
    async def references(body: models.ReferencesRequest) -> dict[str, Any]:
        """A symbol's definitions (every overload, the implementation first) and the code
        that refers to them (calls, imports, inherits, implements), paged by `next_cursor`."""
        return await api.references(body)

    @router.post("/route", tags=["search"], responses=errors(501, 504))
    async def route(body: models.RouteRequest) -> dict[str, Any]:
        """Which repositories and collections a question belongs to, with confidences."""
        return await api.route(body)

    @router.post(
        "/repositories", status_code=202, tags=["repositories"], responses=errors(403, 409, 507)
    )
    async def index_repository(body: models.IndexRepositoryRequest) -> dict[str, Any]:
        """Starts (or joins) a background job indexing a git URL (https, ssh, git) or, for
        admin keys, a path on the server; poll the job. Re-indexing or changing the source
        needs a write grant; creating a repository, `public` and `grant_principal_ids` need
        an admin key. An unknown slug and one the key cannot read are refused alike (403)."""
        return await api.index_repository(body)

    @router.get("/repositories", tags=["repositories"], responses=errors())
    async def list_repositories() -> dict[str, Any]:
        """The repositories the caller may read."""
        return await api.list_repositories()

    @router.get("/repositories/{slug:path}", tags=["repositories"], responses=errors(404))
    async def get_repository(slug: SlugParam) -> dict[str, Any]:
        """Indexed commit, counts and last indexed time of one repository."""
        return await api.get_repository(models.clean_text(slug, "slug"))

    @router.delete(
        "/repositories/{slug:path}",
        status_code=204,
        tags=["repositories"],
        responses=errors(403, 404, 409),
    )
    async def delete_repository(slug: SlugParam) -> Response:
        """Removes a repository and everything indexed from it (admin only; 404 when the
        key cannot read it, 403 when it can)."""
        await api.delete_repository(models.clean_text(slug, "slug"))
        return Response(status_code=204)

    @router.post(
        "/collections", status_code=202, tags=["collections"], responses=errors(403, 409, 507)
    )
    async def index_collection(body: models.IndexCollectionRequest) -> dict[str, Any]:
        """Starts a job indexing a markdown collection (uploaded files or, for admin keys, a
        server directory); the same write rules as repositories."""
        return await api.index_collection(body)

    @router.get("/collections", tags=["collections"], responses=errors())
    async def list_collections() -> dict[str, Any]:
        """The collections the caller may read."""
        return await api.list_collections()

    @router.delete(
        "/collections/{name}",
        status_code=204,
        tags=["collections"],
        responses=errors(403, 404, 409),
    )
    async def delete_collection(name: CollectionParam) -> Response:
        """Removes a collection and everything indexed from it (admin only; 404 when the
        key cannot read it, 403 when it can; 409 while it is being indexed)."""
        await api.delete_collection(models.clean_text(name, "name"))
        return Response(status_code=204)

    @router.get("/jobs/{job_id}", tags=["repositories"], responses=errors(404))
    async def get_job(job_id: JobId) -> dict[str, Any]:
        """An indexing job's state and progress; 404 unless the key started it or may read
        its target."""
        return await api.get_job(models.clean_text(job_id, "job_id"))

    return router

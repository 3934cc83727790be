"""Code search, source routing, repositories, collections and indexing jobs under /api."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from cograph_api import limits
from cograph_api import rest_models as models
from cograph_api.rest_errors import ApiError
from gateway import response_models as R
from gateway.api import GatewayApi
from gateway.responses import answers, errors

SlugParam = Annotated[
    str,
    Path(
        min_length=1,
        max_length=limits.SLUG_MAX_CHARS,
        description="host/owner/name (slashes allowed).",
    ),
]
JobId = Annotated[str, Path(min_length=1, max_length=limits.ID_MAX_CHARS)]
RefQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=limits.REF_MAX_CHARS,
        description="An indexed ref (branch or tag) of the repository.",
    ),
]
CollectionParam = Annotated[
    str, Path(min_length=1, max_length=limits.NAME_MAX_CHARS, description="The collection's name.")
]


def retrieval_router(api: GatewayApi) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.post(
        "/search",
        tags=["search"],
        response_model=None,
        responses=answers(
            R.SearchAnswer,
            ("search", "search_verbose"),
            404,
            501,
            504,
            description="The compact answer, or with verbose the full one.",
        ),
    )
    async def search(body: models.SearchRequest) -> dict[str, Any]:
        """Hybrid search: symbol, lexical and semantic streams fused with RRF, cited. Each
        result has a confidence (high, medium, low, from its streams' evidence); the answer
        has its first result's and no_good_answer when no result is above low."""
        return await api.search(body)

    @router.post(
        "/graph",
        tags=["search"],
        response_model=None,
        responses=answers(R.GraphAnswer, "graph", 404, 501, 504),
    )
    async def graph(body: models.GraphRequest) -> dict[str, Any]:
        """A symbol's definitions in one repository with its callers, callees and parents."""
        return await api.graph(body)

    @router.post(
        "/read", tags=["read"], response_model=None, responses=answers(R.ReadAnswer, "read", 404)
    )
    async def read(body: models.ReadRequest) -> dict[str, Any]:
        """Lines of one indexed file (or collection document) as indexed, at the indexed
        commit; at most 2000 lines and 100,000 characters an answer, `next_start_line` says
        where to go on. 404 for a path outside the index or a source the key cannot read."""
        return await api.read(body)

    @router.get(
        "/files", tags=["read"], response_model=None, responses=answers(R.FilesAnswer, "files", 404)
    )
    async def list_files(
        repo: Annotated[str, Query(min_length=1, max_length=limits.SLUG_MAX_CHARS)],
        prefix: Annotated[str, Query(max_length=limits.PATH_MAX_CHARS)] = "",
        ref: RefQuery | None = None,
        cursor: Annotated[str, Query(max_length=limits.CURSOR_MAX_CHARS)] = "",
        limit: Annotated[
            int | None, Query(ge=limits.FILES_LIMIT_MIN, le=limits.FILES_LIMIT_MAX)
        ] = None,
    ) -> dict[str, Any]:
        """Indexed files (path, language, size in bytes) under `prefix`, by path, paged:
        1000 a page by default (`limit`, at most 5000); `next_cursor` fetches the next."""
        request = models.FilesRequest(
            repo=models.clean_text(repo, "repo"),
            ref=models.clean_text(ref, "ref") if ref is not None else None,
            prefix=models.clean_text(prefix, "prefix"),
            cursor=models.clean_text(cursor, "cursor") or None,
            limit=limit,
        )
        return await api.list_files(request)

    @router.get(
        "/outline",
        tags=["read"],
        response_model=None,
        responses=answers(R.OutlineAnswer, "outline", 404),
    )
    async def outline(
        repo: Annotated[str, Query(min_length=1, max_length=limits.SLUG_MAX_CHARS)],
        path: Annotated[str, Query(min_length=1, max_length=limits.PATH_MAX_CHARS)],
        ref: RefQuery | None = None,
    ) -> dict[str, Any]:
        """A file's symbols as indexed (kind, signature, lines), nested by containment, in
        line order: what the file holds before reading it. At most 2,000 symbols
        (`truncated` past that); 404 for a file outside the index or a repository the key
        cannot read."""
        return await api.outline(
            models.clean_text(repo, "repo"),
            models.clean_text(path, "path"),
            models.clean_text(ref, "ref") if ref is not None else "",
        )

    @router.post(
        "/grep",
        tags=["read"],
        response_model=None,
        responses=answers(R.GrepAnswer, "grep", 404, 504),
    )
    async def grep(body: models.GrepRequest) -> dict[str, Any]:
        """Lines of the indexed files matching a literal or a regular expression, by path
        and line; `truncated` when more matched than `limit`. 400 for a bad expression, 504
        when it runs past its time bound."""
        return await api.grep(body)

    @router.post(
        "/references",
        tags=["search"],
        response_model=None,
        responses=answers(R.ReferencesAnswer, "references", 404),
    )
    async def references(body: models.ReferencesRequest) -> dict[str, Any]:
        """A symbol's definitions (every overload, the implementation first) and the code
        that refers to them (calls, imports, inherits, implements), paged by `next_cursor`."""
        return await api.references(body)

    @router.post(
        "/route",
        tags=["search"],
        response_model=None,
        responses=answers(R.RouteAnswer, "route", 501, 504),
    )
    async def route(body: models.RouteRequest) -> dict[str, Any]:
        """Which repositories and collections a question belongs to, with confidences."""
        return await api.route(body)

    @router.post(
        "/repositories",
        status_code=202,
        tags=["repositories"],
        response_model=None,
        responses=answers(
            R.JobAnswer, "job_answer", 403, 409, 507, status=202, description="The job."
        ),
    )
    async def index_repository(body: models.IndexRepositoryRequest) -> dict[str, Any]:
        """Starts (or joins) a background job indexing a git URL (https, ssh, git) or, for
        admin keys, a path on the server; poll the job. Re-indexing or changing the source
        needs a write grant; creating a repository, `public` and `grant_principal_ids` need
        an admin key. An unknown slug and one the key cannot read are refused alike (403)."""
        return await api.index_repository(body)

    @router.get(
        "/repositories",
        tags=["repositories"],
        response_model=None,
        responses=answers(R.RepositoryList, "repositories"),
    )
    async def list_repositories() -> dict[str, Any]:
        """The repositories the caller may read."""
        return await api.list_repositories()

    # The refs routes come before /repositories/{slug:path}, which would take `.../refs`
    # as part of a slug.
    @router.get(
        "/repositories/{slug:path}/refs",
        tags=["repositories"],
        response_model=None,
        responses=answers(R.RefsOrRepository, "refs", 404),
    )
    async def list_refs(
        slug: SlugParam,
        remote: Annotated[
            bool, Query(description="Also list the branches and tags the source has now.")
        ] = False,
    ) -> dict[str, Any]:
        """The repository's indexed refs (branches and tags besides its default branch,
        each searchable with `ref`) with their commit, job state and sync times; with
        `remote`, the source's branches and tags too (git ls-remote, time-bounded). A
        repository whose slug itself ends in `/refs` is described here when no repository
        has refs under the shorter slug."""
        slug = models.clean_text(slug, "slug")
        try:
            return await api.list_refs(slug, remote)
        except ApiError as err:
            if err.status not in (400, 404):
                raise
            try:
                return await api.get_repository(f"{slug}/refs")
            except ApiError:
                raise err from None

    @router.post(
        "/repositories/{slug:path}/refs",
        status_code=202,
        tags=["repositories"],
        response_model=None,
        responses=answers(
            R.JobAnswer, "job_answer", 403, 404, 409, 507, status=202, description="The job."
        ),
    )
    async def index_ref(slug: SlugParam, body: models.IndexRefRequest) -> dict[str, Any]:
        """Starts (or joins) a job indexing a branch or tag of the repository as its own
        snapshot, searched with `ref`; needs a write grant. 400 for a name that is not a
        branch or tag name or that the source does not have; at most 20 refs a repository."""
        return await api.index_ref(models.clean_text(slug, "slug"), body)

    @router.delete(
        "/repositories/{slug:path}/refs",
        status_code=204,
        tags=["repositories"],
        responses=errors(403, 404, 409),
    )
    async def delete_ref(slug: SlugParam, ref: RefQuery | None = None) -> Response:
        """Removes the indexed ref `ref` of the repository and everything indexed from it
        (write grant; 409 while it is being indexed). Without `ref`, this is the removal of
        a repository whose slug ends in `/refs`."""
        slug = models.clean_text(slug, "slug")
        if ref is None:
            await api.delete_repository(f"{slug}/refs")
        else:
            await api.delete_ref(slug, models.clean_text(ref, "ref"))
        return Response(status_code=204)

    @router.get(
        "/repositories/{slug:path}",
        tags=["repositories"],
        response_model=None,
        responses=answers(R.Repository, "repository", 404),
    )
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
        "/collections",
        status_code=202,
        tags=["collections"],
        response_model=None,
        responses=answers(
            R.JobAnswer, "job_answer", 403, 409, 507, status=202, description="The job."
        ),
    )
    async def index_collection(body: models.IndexCollectionRequest) -> dict[str, Any]:
        """Starts a job indexing a markdown collection (uploaded files or, for admin keys, a
        server directory); the same write rules as repositories."""
        return await api.index_collection(body)

    @router.get(
        "/collections",
        tags=["collections"],
        response_model=None,
        responses=answers(R.CollectionList, "collections"),
    )
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

    @router.get(
        "/jobs/{job_id}",
        tags=["repositories"],
        response_model=None,
        responses=answers(R.Job, "job", 404),
    )
    async def get_job(job_id: JobId) -> dict[str, Any]:
        """An indexing job's state and progress; 404 unless the key started it or may read
        its target."""
        return await api.get_job(models.clean_text(job_id, "job_id"))

    return router

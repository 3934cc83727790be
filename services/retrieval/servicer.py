"""RetrievalService: protobuf in and out; validation, jobs and SQL live elsewhere."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from retrieval import access, store
from retrieval.acl import Viewer
from retrieval.freshness import Freshness, HeadCheck, HeadProbe, IndexedSource
from retrieval.graph import expand, find_definitions
from retrieval.indexer import CollectionRequest, Indexer, RepositoryRequest, UploadedDocument
from retrieval.jobs import Job, JobManager
from retrieval.search import SearchEngine
from retrieval.search_messages import graph_to_pb, node_to_pb, outcome_to_pb, query_from_pb
from retrieval.search_settings import SearchSettings
from retrieval.sources import derive_slug, is_url, validate_slug
from svckit.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied

_JOB_KINDS = {
    "repository": retrieval_pb2.JOB_KIND_REPOSITORY,
    "collection": retrieval_pb2.JOB_KIND_COLLECTION,
}
_JOB_STATES = {
    "queued": retrieval_pb2.JOB_STATE_QUEUED,
    "running": retrieval_pb2.JOB_STATE_RUNNING,
    "succeeded": retrieval_pb2.JOB_STATE_SUCCEEDED,
    "failed": retrieval_pb2.JOB_STATE_FAILED,
}
_MAX_NAME = 200


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def job_to_proto(job: Job) -> retrieval_pb2.Job:
    p = job.progress
    progress = retrieval_pb2.JobProgress(
        phase=p.phase,
        files_seen=p.files_seen,
        files_total=p.files_total,
        files_done=p.files_done,
        files_unchanged=p.files_unchanged,
        files_removed=p.files_removed,
        nodes=p.nodes,
        edges=p.edges,
        chunks=p.chunks,
        embeddings_done=p.embeddings_done,
        embeddings_total=p.embeddings_total,
        skipped=dict(p.skipped),
        files_by_language=dict(p.files_by_language),
        nodes_by_language=dict(p.nodes_by_language),
        seconds=p.seconds,
    )
    return retrieval_pb2.Job(
        id=job.id,
        kind=_JOB_KINDS[job.kind],
        target=job.target,
        state=_JOB_STATES[job.state],
        error=job.error,
        progress=progress,
        created_at=_timestamp(job.created_at),
        finished_at=_timestamp(job.finished_at),
    )


_FRESHNESS = {
    Freshness.CURRENT: retrieval_pb2.FRESHNESS_CURRENT,
    Freshness.STALE: retrieval_pb2.FRESHNESS_STALE,
    Freshness.UNKNOWN: retrieval_pb2.FRESHNESS_UNKNOWN,
}


def indexed_source(row: Mapping[str, Any]) -> IndexedSource:
    return IndexedSource(row["source"], row["source_kind"], row["branch"], row["commit_sha"])


def repository_to_proto(row: Mapping[str, Any], head: HeadCheck) -> retrieval_pb2.Repository:
    languages = row["files_by_language"]
    if isinstance(languages, str):
        languages = json.loads(languages)
    return retrieval_pb2.Repository(
        slug=row["slug"],
        branch=row["branch"],
        source=row["source"],
        commit=row["commit_sha"],
        indexed_at=_timestamp(row["indexed_at"]),
        public=row["public"],
        file_count=row["file_count"],
        node_count=row["node_count"],
        edge_count=row["edge_count"],
        doc_chunk_count=row["doc_chunk_count"],
        files_by_language={str(k): int(v) for k, v in languages.items()},
        head_commit=head.head_commit,
        freshness=_FRESHNESS[head.freshness],
        freshness_detail=head.detail,
    )


def _checked_source(source: str) -> str:
    """A URL as given, or a local directory as an absolute path."""
    if is_url(source):
        return source
    path = Path(source).expanduser()
    if not path.is_dir():
        raise InvalidArgument(f"source {source!r} is neither a directory nor a git URL")
    return str(path.resolve())


def _require_admin_for_server_paths(source: str, policy: str) -> None:
    """Under RETRIEVAL_LOCAL_SOURCES=admin, reading the server's own file system (a path, a
    file:// URL) is an operator's act; agents index remote git URLs or upload documents."""
    remote = is_url(source) and not source.lower().startswith("file:")
    if policy == "admin" and not remote and not Viewer.current().admin:
        raise PermissionDenied(
            "indexing a path on the server needs an admin key; index a git URL or upload "
            "the documents instead"
        )


def _checked_directory(directory: str) -> str:
    path = Path(directory).expanduser()
    if not path.is_dir():
        raise InvalidArgument(f"directory {directory!r} does not exist on the server")
    return str(path.resolve())


def _grants(requested: Any, viewer: Viewer) -> tuple[str, ...]:
    # A non-admin who indexes something can read it afterwards.
    own = (viewer.principal_id,) if viewer.principal_id and not viewer.admin else ()
    return tuple(dict.fromkeys([*own, *(str(p) for p in requested if p)]))


class RetrievalServicer(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(
        self,
        pool: asyncpg.Pool,
        jobs: JobManager,
        indexer: Indexer,
        *,
        engine: SearchEngine,
        search_settings: SearchSettings,
        heads: HeadProbe,
    ) -> None:
        self._pool = pool
        self._jobs = jobs
        self._indexer = indexer
        self._engine = engine
        self._search_settings = search_settings
        self._heads = heads

    async def IndexRepository(
        self, request: retrieval_pb2.IndexRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.IndexRepositoryResponse:
        source = request.source.strip()
        if not source:
            raise InvalidArgument("source is required (a path or a git URL)")
        _require_admin_for_server_paths(source, self._indexer.settings.local_sources)
        source = await asyncio.to_thread(_checked_source, source)
        slug = validate_slug(request.slug or await asyncio.to_thread(derive_slug, source))
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            exists = await store.repository_id_by_slug(conn, slug) is not None
            if exists and not await store.repository_readable_by(conn, slug, viewer):
                raise PermissionDenied(f"cannot re-index {slug}")
        job_request = RepositoryRequest(
            source=source,
            slug=slug,
            branch=request.branch.strip(),
            public=request.public,
            grants=_grants(request.grant_principal_ids, viewer),
        )

        async def body(job: Job) -> None:
            await self._indexer.index_repository(job_request, job)

        job = await self._jobs.submit("repository", slug, body)
        return retrieval_pb2.IndexRepositoryResponse(job=job_to_proto(job))

    async def IndexCollection(
        self, request: retrieval_pb2.IndexCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.IndexCollectionResponse:
        name = request.name.strip()
        if not name or len(name) > _MAX_NAME:
            raise InvalidArgument(f"name is required and at most {_MAX_NAME} characters")
        directory = request.directory.strip()
        if directory:
            _require_admin_for_server_paths(directory, self._indexer.settings.local_sources)
            directory = await asyncio.to_thread(_checked_directory, directory)
        if not directory and not request.documents:
            raise InvalidArgument("give a directory or at least one document")
        paths = [d.path.strip() for d in request.documents]
        if any(not p or p.startswith("/") or ".." in p.split("/") for p in paths):
            raise InvalidArgument("document paths must be relative and non-empty")
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            if await store.collection_exists(conn, name) and not await store.collection_readable_by(
                conn, name, viewer
            ):
                raise PermissionDenied(f"cannot re-index collection {name}")
        job_request = CollectionRequest(
            name=name,
            description=request.description.strip(),
            directory=directory,
            documents=tuple(
                UploadedDocument(path, d.content)
                for path, d in zip(paths, request.documents, strict=True)
            ),
            public=request.public,
            grants=_grants(request.grant_principal_ids, viewer),
        )

        async def body(job: Job) -> None:
            await self._indexer.index_collection(job_request, job)

        job = await self._jobs.submit("collection", name, body)
        return retrieval_pb2.IndexCollectionResponse(job=job_to_proto(job))

    async def GetJob(
        self, request: retrieval_pb2.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GetJobResponse:
        if not request.job_id:
            raise InvalidArgument("job_id is required")
        job = await self._jobs.get(request.job_id)
        if job is None:
            raise NotFound(f"no job {request.job_id}")
        return retrieval_pb2.GetJobResponse(job=job_to_proto(job))

    async def ListRepositories(
        self, request: retrieval_pb2.ListRepositoriesRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListRepositoriesResponse:
        async with self._pool.acquire() as conn:
            rows = await store.list_repositories(conn, Viewer.current())
        heads = await self._heads.check_all([indexed_source(row) for row in rows])
        return retrieval_pb2.ListRepositoriesResponse(
            repositories=[repository_to_proto(r, h) for r, h in zip(rows, heads, strict=True)]
        )

    async def GetRepository(
        self, request: retrieval_pb2.GetRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GetRepositoryResponse:
        async with self._pool.acquire() as conn:
            row = await store.get_repository(conn, request.slug.strip().lower(), Viewer.current())
        if row is None:  # unreadable and absent look the same: nothing leaks
            raise NotFound(f"no repository {request.slug}")
        head = await self._heads.check(indexed_source(row))
        return retrieval_pb2.GetRepositoryResponse(repository=repository_to_proto(row, head))

    async def DeleteRepository(
        self, request: retrieval_pb2.DeleteRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.DeleteRepositoryResponse:
        slug = request.slug.strip().lower()
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            row = await store.get_repository(conn, slug, viewer)
            if row is None:
                raise NotFound(f"no repository {request.slug}")
            if self._jobs.active_job("repository", slug) is not None:
                raise FailedPrecondition(f"{slug} is being indexed; delete it when the job ends")
            await store.delete_repository(conn, row["id"])
        await self._indexer.forget_repository(slug)
        return retrieval_pb2.DeleteRepositoryResponse(deleted=True)

    async def ListCollections(
        self, request: retrieval_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListCollectionsResponse:
        async with self._pool.acquire() as conn:
            rows = await store.list_collections(conn, Viewer.current())
        return retrieval_pb2.ListCollectionsResponse(
            collections=[
                retrieval_pb2.Collection(
                    name=row["name"],
                    description=row["description"],
                    public=row["public"],
                    document_count=row["document_count"],
                    chunk_count=row["chunk_count"],
                    indexed_at=_timestamp(row["indexed_at"]),
                )
                for row in rows
            ]
        )

    # ---- search, graph and access ----

    async def Search(
        self, request: retrieval_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.SearchResponse:
        query = query_from_pb(request, self._search_settings)
        outcome = await self._engine.search(query, Viewer.current())
        return outcome_to_pb(outcome)

    async def Graph(
        self, request: retrieval_pb2.GraphRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GraphResponse:
        repo = request.repo.strip().lower()
        symbol = request.symbol.strip()
        if not repo or not symbol or len(symbol) > _MAX_NAME:
            raise InvalidArgument(f"repo and symbol are required; symbol at most {_MAX_NAME}")
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            if not await store.repository_readable_by(conn, repo, viewer):
                raise NotFound(f"no repository {repo}")
            definitions = await find_definitions(conn, repo, symbol, viewer)
            seeds = [int(node.id.split(":", 1)[1]) for node in definitions]
            graph = await expand(conn, seeds, repo, viewer)
        return retrieval_pb2.GraphResponse(
            definitions=[node_to_pb(node) for node in definitions], graph=graph_to_pb(graph)
        )

    async def GrantAccess(
        self, request: retrieval_pb2.GrantAccessRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GrantAccessResponse:
        access.require_admin(Viewer.current())
        principal = access.checked_principal(request.principal_id)
        target = _access_target(request)
        async with self._pool.acquire() as conn:
            changed = await access.grant(conn, principal, target)
        return retrieval_pb2.GrantAccessResponse(changed=changed)

    async def RevokeAccess(
        self, request: retrieval_pb2.RevokeAccessRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.RevokeAccessResponse:
        access.require_admin(Viewer.current())
        principal = access.checked_principal(request.principal_id)
        target = _access_target(request)
        async with self._pool.acquire() as conn:
            changed = await access.revoke(conn, principal, target)
        return retrieval_pb2.RevokeAccessResponse(changed=changed)

    async def SetVisibility(
        self, request: retrieval_pb2.SetVisibilityRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.SetVisibilityResponse:
        access.require_admin(Viewer.current())
        target = _access_target(request)
        async with self._pool.acquire() as conn:
            changed = await access.set_visibility(conn, target, request.public)
        return retrieval_pb2.SetVisibilityResponse(changed=changed)


def _access_target(
    request: retrieval_pb2.GrantAccessRequest
    | retrieval_pb2.RevokeAccessRequest
    | retrieval_pb2.SetVisibilityRequest,
) -> access.Target:
    kind = request.WhichOneof("target") or ""
    return access.checked_target(kind, getattr(request, kind) if kind else "")

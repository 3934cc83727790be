"""RetrievalService: protobuf in and out; validation, jobs and SQL live elsewhere."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg
import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from cograph_api import limits
from cograph_api.access_rules import Viewer
from cograph_api.anchors import COMMONS_PRINCIPAL, CodeTarget, check_target, given
from cograph_api.cursors import CursorCodec
from cograph_api.push_hooks import SYNC_KEYS_MAX, WEBHOOK_PRINCIPAL, is_repository_key
from retrieval import anchors, catalog, grants, permissions
from retrieval.indexing import index_store
from retrieval.indexing.freshness import (
    Freshness,
    HeadCheck,
    HeadLookupError,
    HeadProbe,
    IndexedSource,
)
from retrieval.indexing.indexer import (
    CollectionRequest,
    Indexer,
    RepositoryRequest,
    UploadedDocument,
    collection_request,
    repository_request,
    request_to_json,
)
from retrieval.indexing.jobs import Job, JobManager
from retrieval.indexing.push_sync import PushSync
from retrieval.indexing.redaction import scrub, strip_secrets, view
from retrieval.indexing.refs import (
    RemoteRef,
    check_ref,
    kind_of,
    parse_ls_remote,
    ref_slug,
    resolve,
    scoped_slug,
    split_ref_slug,
    stored_branch,
)
from retrieval.indexing.source_policy import (
    MAX_BRANCH_CHARS,
    MAX_SLUG_CHARS,
    MAX_SOURCE_CHARS,
    LocalPolicy,
    check_branch,
    check_slug,
    check_text,
    parse_source,
)
from retrieval.indexing.sources import derive_slug
from retrieval.outline import Symbol as OutlineSymbol
from retrieval.outline import outline as file_outline
from retrieval.search.budget import fit_answer
from retrieval.search.code_notes import (
    CodeNote,
    NotesLookup,
    Targets,
    attach_to_hits,
    on_default_branch,
)
from retrieval.search.engine import SearchEngine
from retrieval.search.graph import expand
from retrieval.search.messages import (
    EDGE_TO_PB,
    graph_to_pb,
    node_to_pb,
    notes_to_pb,
    query_from_pb,
)
from retrieval.search.reading import grep, list_files, read_file
from retrieval.search.references import find_definitions, references
from retrieval.search.search_settings import SearchSettings
from retrieval.settings import IndexSettings
from svckit.disk import DiskWatch
from svckit.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from svckit.replicas import EVERYONE, ReadRouter

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
_MAX_NAME = limits.NAME_MAX_CHARS  # collection names, as the gateway publishes them
_MAX_JOB_ID = 100
_MAX_DOCUMENT_PATH = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A commit id as git writes it: SHA-1 or SHA-256, in hex.
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def job_to_proto(job: Job, viewer: Viewer) -> retrieval_pb2.Job:
    """A job as `viewer` sees it: its error scrubbed of the source's secrets and, for a key
    that is not an admin, of server paths (redaction.scrub)."""
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
        error=scrub(job.error, str(job.request.get("source") or ""), admin=viewer.admin),
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


def repository_to_proto(
    row: Mapping[str, Any], head: HeadCheck, viewer: Viewer
) -> retrieval_pb2.Repository:
    """A repository as `viewer` sees it: an admin gets the source without any secret, any
    other key without userinfo and without server paths (redaction); the freshness detail
    is scrubbed the same way."""
    source = row["source"]
    if row["reindex_reason"]:
        # What was indexed lacks data this release stores (upgrades.py): not current,
        # whatever the branch's head says, until the background re-index publishes.
        head = HeadCheck(Freshness.STALE, head.head_commit, detail=row["reindex_reason"])
    languages = row["files_by_language"]
    if isinstance(languages, str):
        languages = json.loads(languages)
    return retrieval_pb2.Repository(
        slug=row["slug"],
        branch=row["branch"],
        source=view(source, admin=viewer.admin),
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
        freshness_detail=scrub(head.detail, source, admin=viewer.admin),
        last_checked_at=_timestamp(row["last_checked_at"]),
        last_synced_at=_timestamp(row["last_synced_at"]),
    )


def _outline_symbol(symbol: OutlineSymbol) -> retrieval_pb2.OutlineSymbol:
    return retrieval_pb2.OutlineSymbol(
        name=symbol.name,
        qualified_name=symbol.qualified_name,
        kind=symbol.kind,
        signature=symbol.signature,
        start_line=symbol.start_line,
        end_line=symbol.end_line,
        children=[_outline_symbol(child) for child in symbol.children],
    )


def _checked_name(name: str) -> str:
    value = name.strip()
    if not value or len(value) > _MAX_NAME:
        raise InvalidArgument(f"name is required and at most {_MAX_NAME} characters")
    if _CONTROL.search(value):
        raise InvalidArgument("name must not contain control characters or newlines")
    return value


def _checked_document_path(path: str) -> str:
    value = path.strip()
    if (
        not value
        or value.startswith("/")
        or ".." in value.split("/")
        or _CONTROL.search(value)
        or len(value) > _MAX_DOCUMENT_PATH
    ):
        raise InvalidArgument(
            f"document path {value!r} must be relative, without '..', control characters, "
            f"and at most {_MAX_DOCUMENT_PATH} characters"
        )
    return value


_ROLES = {
    retrieval_pb2.ACCESS_ROLE_UNSPECIFIED: "read",
    retrieval_pb2.ACCESS_ROLE_READ: "read",
    retrieval_pb2.ACCESS_ROLE_WRITE: "write",
}


def _role(value: retrieval_pb2.AccessRole.ValueType) -> grants.Role:
    if value not in _ROLES:
        raise InvalidArgument(f"unknown role {value}; use read or write")
    return grants.checked_role(_ROLES[value])


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
        cursors: CursorCodec,
        maintenance_pool: asyncpg.Pool | None = None,
        disk: DiskWatch | None = None,
        push_sync: PushSync | None = None,
        reads: ReadRouter | None = None,
        notes: NotesLookup | None = None,
    ) -> None:
        self._pool = pool
        # Where read-only requests run: a replica that has replayed the caller's own
        # writes, else the primary (svckit.replicas); None: always the primary.
        self._reads = reads
        # The commons' notes beside code (search/code_notes.py); None: no notes.
        self._notes = notes
        # What the push webhooks queue (SyncSource).
        self._push_sync = push_sync or PushSync(pool, jobs)
        # New index jobs are refused while the disk is nearly full (svckit.disk).
        self._disk = disk
        # Signs and checks the paging cursors of files and references.
        self._cursors = cursors
        # Deleting a large repository can outlast a request's statement budget: it runs on
        # the indexer's pool (COGRAPH_DB_INDEX_STATEMENT_TIMEOUT_S).
        self._maintenance_pool = maintenance_pool or pool
        self._jobs = jobs
        self._indexer = indexer
        self._engine = engine
        self._search_settings = search_settings
        self._heads = heads
        settings = indexer.settings
        self._local = LocalPolicy(
            "any" if settings.local_sources == "any" else "admin",
            indexer.data_dir,
            settings.local_roots,
            settings.protected_dirs,
        )
        # Where remote sources may point (the HeadProbe got the same policy at start).
        self._hosts = indexer.host_policy

    @property
    def _settings(self) -> IndexSettings:
        return self._indexer.settings

    async def _read_pool(self) -> asyncpg.Pool:
        """The pool for a read-only request of the current caller (svckit.replicas)."""
        if self._reads is None:
            return self._pool
        return (await self._reads.for_read(Viewer.current().principal_id or "")).pool

    async def _wrote(self, *principals: str) -> None:
        """After a committed change: these principals' reads (EVERYONE: every reader's)
        wait for a replica that has replayed it, so a revoked grant or a repository made
        private is never read from a replica that has not seen the change yet."""
        if self._reads is not None:
            for principal in principals:
                await self._reads.wrote(principal)

    async def run_job(self, job: Job) -> None:
        """Runs a claimed index job (indexing/jobs.py), here or on any replica, as the
        principal who submitted it."""
        viewer = job.requester
        # Checked again when the job starts: a grant may have gone while it queued.
        await self._authorize_index(job.kind, job.target, viewer)  # type: ignore[arg-type]
        try:
            if job.kind == "repository":
                await self._indexer.index_repository(repository_request(job.request), job)
            else:
                await self._indexer.index_collection(collection_request(job.request), job)
        finally:
            # Whatever the job published, its submitters read it back (svckit.replicas).
            await self._wrote(*sorted(job.requested_by))

    async def IndexRepository(
        self, request: retrieval_pb2.IndexRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.IndexRepositoryResponse:
        viewer = Viewer.current()
        self._require_space("indexing")
        slug = check_slug(request.slug) if request.slug.strip() else ""
        # Syntax first, the same answer whoever asks: nothing here reaches git or a path.
        source = parse_source(await self._stored_source(slug, request.source, viewer))
        branch = await asyncio.to_thread(check_branch, request.branch)
        permissions.require_admin_fields(viewer, request.public, request.grant_principal_ids)
        if source.is_local:
            self._local.require_allowed(viewer.admin)  # before the file system is touched
            assert source.path is not None
            resolved = await asyncio.to_thread(
                self._local.check_directory, source.path, admin=viewer.admin
            )
            source_text = resolved.as_uri() if source.kind == "file_url" else str(resolved)
        else:
            source_text = source.text
        if not slug:
            slug = check_slug(await asyncio.to_thread(derive_slug, source_text))
        creating = await self._authorize_index("repository", slug, viewer)
        # The source's host (source_policy.HostPolicy), after authorization: no name is
        # resolved for a caller that may not write the target, and the refusal cannot tell
        # a taken name from a free one.
        await self._hosts.check(source, admin=viewer.admin)
        job_request = RepositoryRequest(
            source=source_text,
            slug=slug,
            branch=branch,
            public=request.public,
            grants=tuple(dict.fromkeys(str(p) for p in request.grant_principal_ids if p)),
            creator=viewer.principal_id if creating else None,
        )

        job = await self._jobs.submit("repository", slug, request_to_json(job_request), viewer)
        return retrieval_pb2.IndexRepositoryResponse(job=job_to_proto(job, viewer))

    def _require_space(self, what: str) -> None:
        if self._disk is not None:
            self._disk.require_space(what)

    async def _stored_source(self, slug: str, given: str, viewer: Viewer) -> str:
        """The source to index: `given`, unless it is the repository's stored source as
        this viewer was shown it (`local`, a URL without its user; what cograph_index
        sends back), which stands for the stored source, without any secret. Only for a
        repository the viewer reads; whether it may write it is checked after."""
        shown = given.strip()
        if not slug or not shown:
            return given
        async with self._pool.acquire() as conn:
            row = await catalog.get_repository(conn, slug, viewer)
        if row is None or shown != view(row["source"], admin=viewer.admin):
            return given
        return strip_secrets(row["source"])

    async def _authorize_index(self, kind: permissions.Kind, name: str, viewer: Viewer) -> bool:
        """Raises unless `viewer` may index the target; True for a non-admin's creation."""
        if viewer.admin:
            return False
        async with self._pool.acquire() as conn:
            found = await catalog.access_of(conn, kind, name, viewer)
        create: permissions.CreatePolicy = (
            "any" if self._settings.create_sources == "any" else "admin"
        )
        if kind == "repository" and split_ref_slug(name)[1]:
            # A ref is written under its repository's write access, and never creates one.
            create = "admin"
        creating = permissions.authorize_index(found, viewer, kind, name, create)
        active = await self._jobs.active_job(kind, name)
        if creating and active is not None and viewer.principal_id not in active.requested_by:
            # Someone else is creating it right now: joining would show their job.
            raise permissions.not_writable(kind, name)
        return creating

    async def IndexCollection(
        self, request: retrieval_pb2.IndexCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.IndexCollectionResponse:
        viewer = Viewer.current()
        self._require_space("indexing")
        name = _checked_name(request.name)
        paths = [_checked_document_path(d.path) for d in request.documents]
        raw_directory = check_text(request.directory, "directory", MAX_SOURCE_CHARS)
        if not raw_directory and not request.documents:
            raise InvalidArgument("give a directory or at least one document")
        permissions.require_admin_fields(viewer, request.public, request.grant_principal_ids)
        directory = ""
        if raw_directory:
            self._local.require_allowed(viewer.admin)
            resolved = await asyncio.to_thread(
                self._local.check_directory, raw_directory, admin=viewer.admin, what="directory"
            )
            directory = str(resolved)
        creating = await self._authorize_index("collection", name, viewer)
        job_request = CollectionRequest(
            name=name,
            description=request.description.strip(),
            directory=directory,
            documents=tuple(
                UploadedDocument(path, d.content)
                for path, d in zip(paths, request.documents, strict=True)
            ),
            public=request.public,
            grants=tuple(dict.fromkeys(str(p) for p in request.grant_principal_ids if p)),
            creator=viewer.principal_id if creating else None,
        )

        job = await self._jobs.submit("collection", name, request_to_json(job_request), viewer)
        return retrieval_pb2.IndexCollectionResponse(job=job_to_proto(job, viewer))

    async def GetJob(
        self, request: retrieval_pb2.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GetJobResponse:
        job_id = request.job_id.strip()
        if not job_id or len(job_id) > _MAX_JOB_ID:
            raise InvalidArgument(f"job_id is required and at most {_MAX_JOB_ID} characters")
        viewer = Viewer.current()
        job = await self._jobs.get(job_id)
        if job is not None and not viewer.admin:
            async with self._pool.acquire() as conn:
                target = await catalog.access_of(conn, job.kind, job.target, viewer)
            if not permissions.job_visible(viewer, job.requested_by, target):
                job = None  # someone else's job on a target this viewer cannot read
        if job is None:
            raise NotFound(f"no job {job_id}")
        return retrieval_pb2.GetJobResponse(job=job_to_proto(job, viewer))

    async def ListRepositories(
        self, request: retrieval_pb2.ListRepositoriesRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListRepositoriesResponse:
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            rows = await catalog.list_repositories(conn, viewer)
        heads = await self._heads.check_all([indexed_source(row) for row in rows])
        return retrieval_pb2.ListRepositoriesResponse(
            repositories=[
                repository_to_proto(r, h, viewer) for r, h in zip(rows, heads, strict=True)
            ]
        )

    async def GetRepository(
        self, request: retrieval_pb2.GetRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GetRepositoryResponse:
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            row = await catalog.get_repository(conn, request.slug.strip().lower(), viewer)
        if row is None:  # unreadable and absent look the same: nothing leaks
            raise NotFound(f"no repository {request.slug}")
        head = await self._heads.check(indexed_source(row))
        return retrieval_pb2.GetRepositoryResponse(
            repository=repository_to_proto(row, head, viewer)
        )

    async def DeleteRepository(
        self, request: retrieval_pb2.DeleteRepositoryRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.DeleteRepositoryResponse:
        # Not check_slug: an admin must be able to remove a row written before slugs were
        # validated; the clone directory is only removed when the slug is a valid one.
        slug = request.slug.strip().lower()
        if not slug or len(slug) > MAX_SLUG_CHARS:
            raise InvalidArgument(f"slug is required and at most {MAX_SLUG_CHARS} characters")
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            found = await catalog.access_of(conn, "repository", slug, viewer)
            permissions.authorize_delete(found, viewer, "repository", slug)
            repository_id = await catalog.repository_id_by_slug(conn, slug)
            if repository_id is None:
                raise NotFound(f"no repository {request.slug}")
            for target in [slug, *await catalog.ref_slugs(conn, repository_id)]:
                if await self._jobs.active_job("repository", target) is not None:
                    raise FailedPrecondition(
                        f"{target} is being indexed; delete it when the job ends"
                    )
        # Once accepted, the deletion finishes even if the caller stops waiting (a cancelled
        # request would otherwise roll it back halfway through a large repository).
        await asyncio.shield(self._delete_repository(repository_id, slug))
        return retrieval_pb2.DeleteRepositoryResponse(deleted=True)

    async def _delete_repository(self, repository_id: int, slug: str) -> None:
        async with self._maintenance_pool.acquire() as conn:
            await catalog.delete_repository(conn, repository_id)
        await self._wrote(EVERYONE)
        await self._indexer.forget_repository(slug)

    # ---- named refs (indexing/refs.py) ----

    async def _readable_repository(self, raw_slug: str, viewer: Viewer) -> Mapping[str, Any]:
        """The repository `raw_slug` names, if the viewer may read it; NotFound otherwise
        (unknown and unreadable alike)."""
        slug = check_slug(raw_slug)
        async with self._pool.acquire() as conn:
            row = await catalog.get_repository(conn, slug, viewer)
        if row is None:
            raise NotFound(f"no repository {slug}")
        return row

    async def ListRefs(
        self, request: retrieval_pb2.ListRefsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListRefsResponse:
        viewer = Viewer.current()
        row = await self._readable_repository(request.slug, viewer)
        async with self._pool.acquire() as conn:
            indexed = await catalog.indexed_refs(conn, row["id"])
        reply = retrieval_pb2.ListRefsResponse(
            slug=row["slug"],
            default_branch=row["branch"],
            refs=[
                retrieval_pb2.IndexedRef(
                    name=r["ref"],
                    kind=kind_of(r["branch"]),
                    commit=r["commit_sha"],
                    indexed_at=_timestamp(r["indexed_at"]),
                    state=r["job_state"] or "",
                    last_checked_at=_timestamp(r["last_checked_at"]),
                    last_synced_at=_timestamp(r["last_synced_at"]),
                    file_count=r["file_count"],
                    job_id=r["job_id"] or "",
                )
                for r in indexed
            ],
        )
        if request.remote:
            remote, detail = await self._remote_refs(row, viewer)
            reply.remote_refs.extend(
                retrieval_pb2.RemoteRef(name=r.name, kind=r.kind, commit=r.commit)
                for r in remote[: limits.REMOTE_REFS_MAX]
            )
            reply.remote_truncated = len(remote) > limits.REMOTE_REFS_MAX
            reply.remote_detail = scrub(detail, row["source"], admin=viewer.admin)
        return reply

    async def _remote_refs(
        self, row: Mapping[str, Any], viewer: Viewer
    ) -> tuple[list[RemoteRef], str]:
        """The source's branches and tags, or none and why (a plain directory has none; a
        source that cannot be reached says so), looked up under the viewer's authority
        over hosts, as its own index run would be."""
        if row["source_kind"] == "dir":
            return [], "a plain directory has no branches or tags"
        try:
            out = await self._heads.list_refs(row["source"], admin=viewer.admin)
        except HeadLookupError as err:
            return [], f"cannot list the source's refs: {err}"
        return parse_ls_remote(out), ""

    async def IndexRef(
        self, request: retrieval_pb2.IndexRefRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.IndexRefResponse:
        viewer = Viewer.current()
        self._require_space("indexing")
        ref = check_ref(request.ref)  # syntax first, whoever asks: nothing reaches git yet
        row = await self._readable_repository(request.slug, viewer)
        slug, target = row["slug"], ref_slug(row["slug"], ref)
        await self._authorize_index("repository", target, viewer)
        remote, detail = await self._remote_refs(row, viewer)
        if detail:
            raise FailedPrecondition(scrub(detail, row["source"], admin=viewer.admin))
        found = resolve(remote, ref)
        if found is None:
            raise InvalidArgument(f"ref {ref!r}: the source of {slug} has no such branch or tag")
        branch = stored_branch(found.name, found.kind)
        async with self._pool.acquire() as conn, conn.transaction():
            # The repository's row is locked so that two additions cannot both pass the cap.
            await conn.execute("SELECT 1 FROM repositories WHERE id = $1 FOR UPDATE", row["id"])
            existing = await catalog.ref_slugs(conn, row["id"])
            if target not in existing and len(existing) >= limits.REFS_PER_REPOSITORY_MAX:
                raise FailedPrecondition(
                    f"{slug} has {len(existing)} indexed refs, the most a repository may have "
                    f"({limits.REFS_PER_REPOSITORY_MAX}); remove one first"
                )
            # Listed (and searchable as empty) from now on, so its job's state shows.
            await index_store.upsert_ref(conn, slug, ref, row["source"], row["source_kind"])
        job_request = RepositoryRequest(
            source=strip_secrets(row["source"]),
            slug=target,
            branch=branch,
            public_hosts_only=not viewer.admin and not parse_source(row["source"]).is_local,
        )
        job = await self._jobs.submit("repository", target, request_to_json(job_request), viewer)
        return retrieval_pb2.IndexRefResponse(job=job_to_proto(job, viewer))

    async def DeleteRef(
        self, request: retrieval_pb2.DeleteRefRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.DeleteRefResponse:
        viewer = Viewer.current()
        ref = check_ref(request.ref)
        row = await self._readable_repository(request.slug, viewer)
        target = ref_slug(row["slug"], ref)
        await self._authorize_index("repository", target, viewer)
        async with self._pool.acquire() as conn:
            ref_id = await catalog.repository_id_by_slug(conn, target)
        if ref_id is None:
            raise NotFound(f"{row['slug']} has no indexed ref {ref!r}")
        if await self._jobs.active_job("repository", target) is not None:
            raise FailedPrecondition(f"{target} is being indexed; remove it when the job ends")
        # Finished even if the caller stops waiting, like a repository's delete.
        await asyncio.shield(self._delete_repository(ref_id, target))
        return retrieval_pb2.DeleteRefResponse(deleted=True)

    async def ListCollections(
        self, request: retrieval_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListCollectionsResponse:
        async with self._pool.acquire() as conn:
            rows = await catalog.list_collections(conn, Viewer.current())
        return retrieval_pb2.ListCollectionsResponse(
            collections=[
                retrieval_pb2.Collection(
                    name=row["name"],
                    description=row["description"],
                    public=row["public"],
                    document_count=row["document_count"],
                    chunk_count=row["chunk_count"],
                    indexed_at=_timestamp(row["indexed_at"]),
                    last_checked_at=_timestamp(row["last_checked_at"]),
                    last_synced_at=_timestamp(row["last_synced_at"]),
                )
                for row in rows
            ]
        )

    async def DeleteCollection(
        self, request: retrieval_pb2.DeleteCollectionRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.DeleteCollectionResponse:
        name = request.name.strip()
        if not name or len(name) > _MAX_NAME:
            raise InvalidArgument(f"name is required and at most {_MAX_NAME} characters")
        viewer = Viewer.current()
        async with self._pool.acquire() as conn:
            found = await catalog.access_of(conn, "collection", name, viewer)
            permissions.authorize_delete(found, viewer, "collection", name)
            collection_id = await catalog.collection_id_by_name(conn, name)
            if collection_id is None:
                raise NotFound(f"no collection {name}")
            if await self._jobs.active_job("collection", name) is not None:
                raise FailedPrecondition(f"{name} is being indexed; delete it when the job ends")
        # Finished even if the caller stops waiting, like a repository's delete.
        await asyncio.shield(self._delete_collection(collection_id))
        return retrieval_pb2.DeleteCollectionResponse(deleted=True)

    async def _delete_collection(self, collection_id: int) -> None:
        async with self._maintenance_pool.acquire() as conn:
            await catalog.delete_collection(conn, collection_id)
        await self._wrote(EVERYONE)

    # ---- search, graph and access ----

    async def Search(
        self, request: retrieval_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.SearchResponse:
        budget = request.max_tokens if request.HasField("max_tokens") else None
        if budget is not None and not limits.MAX_TOKENS_MIN <= budget <= limits.MAX_TOKENS_MAX:
            raise InvalidArgument(
                f"max_tokens must be between {limits.MAX_TOKENS_MIN} and {limits.MAX_TOKENS_MAX}"
            )
        if budget is not None and not request.HasField("top_k"):
            # The budget is the bound: rank as many candidates as a request may ask for.
            widened = retrieval_pb2.SearchRequest()
            widened.CopyFrom(request)
            widened.top_k = limits.TOP_K_MAX
            request = widened
        query = query_from_pb(request, self._search_settings)
        outcome = await self._engine.search(query, Viewer.current())
        if self._notes is not None and _wants_notes(request):
            # Before the budget: a result's notes are part of what it costs.
            started = time.perf_counter()
            outcome.notes_reason = await attach_to_hits(self._notes, outcome.results)
            outcome.timings_ms["notes"] = round((time.perf_counter() - started) * 1000, 3)
        return await asyncio.to_thread(fit_answer, outcome, budget, request.verbose)

    async def Graph(
        self, request: retrieval_pb2.GraphRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GraphResponse:
        repo = request.repo.strip().lower()
        symbol = request.symbol.strip()
        if not repo or not symbol or len(symbol) > limits.SYMBOL_MAX_CHARS:
            raise InvalidArgument(
                f"repo and symbol are required; symbol at most {limits.SYMBOL_MAX_CHARS}"
            )
        viewer = Viewer.current()
        async with (await self._read_pool()).acquire() as conn:
            if not await catalog.repository_readable_by(conn, repo, viewer):
                raise NotFound(f"no repository {repo}")
            # The implementation first (never an overload stub), then its overloads.
            definitions = [d.node for d in await find_definitions(conn, repo, symbol, viewer)]
            seeds = [int(node.id.split(":", 1)[1]) for node in definitions]
            graph = await expand(conn, seeds, repo, viewer)
        return retrieval_pb2.GraphResponse(
            definitions=[node_to_pb(node) for node in definitions], graph=graph_to_pb(graph)
        )

    async def References(
        self, request: retrieval_pb2.ReferencesRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ReferencesResponse:
        repo = scoped_slug(_required_repo(request.repo), request.ref)
        symbol = request.symbol.strip()
        if not symbol or len(symbol) > limits.SYMBOL_MAX_CHARS or _CONTROL.search(symbol):
            raise InvalidArgument(
                f"symbol is required, at most {limits.SYMBOL_MAX_CHARS} characters"
            )
        async with (await self._read_pool()).acquire() as conn:
            page = await references(
                conn,
                Viewer.current(),
                repo=repo,
                symbol=symbol,
                cursor=request.cursor,
                cursors=self._cursors,
                limit=request.limit if request.HasField("limit") else None,
            )
        # The notes of each reference's enclosing symbol: the code a change at that use
        # touches. The referenced symbol's own notes would be the same on every reference.
        targets = Targets()
        for r in page.references:
            targets.add(
                CodeTarget(repo, r.path, r.symbol, r.start_line, r.end_line)
                if on_default_branch(repo)
                else None
            )
        notes: list[list[CodeNote]] = [[] for _ in page.references]
        reason = ""
        if self._notes is not None and _wants_notes(request):
            found = await self._notes.find(targets.targets)
            notes, reason = targets.notes(found), targets.reason(found)
        return retrieval_pb2.ReferencesResponse(
            definitions=[node_to_pb(node) for node in page.definitions],
            references=[
                retrieval_pb2.Reference(
                    path=r.path,
                    start_line=r.start_line,
                    end_line=r.end_line,
                    symbol=r.symbol,
                    kind=EDGE_TO_PB[r.kind],
                    target=r.target,
                    line=r.line,
                    notes=notes_to_pb(its_notes),
                )
                for r, its_notes in zip(page.references, notes, strict=True)
            ],
            truncated=bool(page.next_cursor),
            next_cursor=page.next_cursor,
            notes_reason=reason,
        )

    # ---- reading what was indexed ----

    async def ReadFile(
        self, request: retrieval_pb2.ReadFileRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ReadFileResponse:
        repo = _scope_name(request.repo, limits.SLUG_MAX_CHARS, "repo").lower()
        collection = _scope_name(request.collection, limits.NAME_MAX_CHARS, "collection")
        if request.ref and collection:
            raise InvalidArgument("ref is a repository's branch or tag: give repo, not collection")
        repo = scoped_slug(repo, request.ref)
        async with (await self._read_pool()).acquire() as conn:
            found = await read_file(
                conn,
                Viewer.current(),
                repo=repo,
                collection=collection,
                path=request.path,
                start_line=request.start_line if request.HasField("start_line") else None,
                end_line=request.end_line if request.HasField("end_line") else None,
            )
        lines = found.lines
        found_repo, found_ref = split_ref_slug(found.repo)
        reply = retrieval_pb2.ReadFileResponse(
            repo=found_repo,
            ref=found_ref,
            collection=found.collection,
            path=found.path,
            commit=found.commit,
            start_line=lines.start_line,
            end_line=lines.end_line,
            total_lines=lines.total_lines,
            content=lines.content,
            language=found.language,
        )
        if lines.next_start_line is not None:
            reply.next_start_line = lines.next_start_line
        if (
            self._notes is not None
            and _wants_notes(request)
            and on_default_branch(found.repo)
            and lines.end_line >= lines.start_line
        ):
            # The notes anchored to code overlapping the lines returned.
            target = CodeTarget(found.repo, found.path, "", lines.start_line, lines.end_line)
            read = await self._notes.find([target], limits.NOTES_PER_TARGET_MAX)
            reply.notes.extend(notes_to_pb(read.of(0)))
            reply.notes_reason = read.reason
        return reply

    async def Outline(
        self, request: retrieval_pb2.OutlineRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.OutlineResponse:
        repo = _scope_name(request.repo, limits.SLUG_MAX_CHARS, "repo").lower()
        if not repo:
            raise InvalidArgument("repo is required")
        repo = scoped_slug(repo, request.ref)
        async with (await self._read_pool()).acquire() as conn:
            found = await file_outline(conn, Viewer.current(), repo=repo, path=request.path)
        return retrieval_pb2.OutlineResponse(
            repo=split_ref_slug(found.repo)[0],
            path=found.path,
            commit=found.commit,
            language=found.language,
            symbols=[_outline_symbol(s) for s in found.symbols],
            truncated=found.truncated,
        )

    async def ListFiles(
        self, request: retrieval_pb2.ListFilesRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ListFilesResponse:
        repo = scoped_slug(_required_repo(request.repo), request.ref)
        async with (await self._read_pool()).acquire() as conn:
            page = await list_files(
                conn,
                Viewer.current(),
                repo=repo,
                prefix=request.prefix,
                cursor=request.cursor,
                cursors=self._cursors,
                limit=request.limit if request.HasField("limit") else None,
            )
        return retrieval_pb2.ListFilesResponse(
            files=[
                retrieval_pb2.IndexedFile(path=f.path, language=f.language, size=f.size)
                for f in page.files
            ],
            truncated=bool(page.next_cursor),
            next_cursor=page.next_cursor,
        )

    async def Grep(
        self, request: retrieval_pb2.GrepRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GrepResponse:
        # No repository: every one the caller may read.
        repo = scoped_slug(
            _scope_name(request.repo, limits.SLUG_MAX_CHARS, "repo").lower(), request.ref
        )
        async with (await self._read_pool()).acquire() as conn:
            found = await grep(
                conn,
                Viewer.current(),
                repo=repo,
                pattern=request.pattern,
                regex=request.regex,
                path_glob=request.path_glob,
                limit=request.limit if request.HasField("limit") else None,
                case_insensitive=request.case_insensitive,
                context=request.context,
            )
        return retrieval_pb2.GrepResponse(
            matches=[
                retrieval_pb2.GrepMatch(
                    path=m.path,
                    line=m.line,
                    text=m.text,
                    repo=split_ref_slug(m.repo)[0],
                    before=m.before,
                    after=m.after,
                )
                for m in found.matches
            ],
            truncated=found.truncated,
            commit=found.commit,
            commits={split_ref_slug(slug)[0]: sha for slug, sha in found.commits.items()},
        )

    async def GrantAccess(
        self, request: retrieval_pb2.GrantAccessRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.GrantAccessResponse:
        grants.require_admin(Viewer.current())
        principal = grants.checked_principal(request.principal_id)
        target = _access_target(request)
        role = _role(request.role)
        async with self._pool.acquire() as conn:
            changed = await grants.grant(conn, principal, target, role)
        await self._wrote(principal, Viewer.current().principal_id or "")
        return retrieval_pb2.GrantAccessResponse(changed=changed)

    async def RevokeAccess(
        self, request: retrieval_pb2.RevokeAccessRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.RevokeAccessResponse:
        grants.require_admin(Viewer.current())
        principal = grants.checked_principal(request.principal_id)
        target = _access_target(request)
        role = _role(request.role)
        async with self._pool.acquire() as conn:
            changed = await grants.revoke(conn, principal, target, role)
        await self._wrote(principal, Viewer.current().principal_id or "")
        return retrieval_pb2.RevokeAccessResponse(changed=changed)

    async def SetVisibility(
        self, request: retrieval_pb2.SetVisibilityRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.SetVisibilityResponse:
        grants.require_admin(Viewer.current())
        target = _access_target(request)
        async with self._pool.acquire() as conn:
            changed = await grants.set_visibility(conn, target, request.public)
        await self._wrote(EVERYONE)
        return retrieval_pb2.SetVisibilityResponse(changed=changed)

    async def SyncSource(
        self, request: retrieval_pb2.SyncSourceRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.SyncSourceResponse:
        """A push a webhook verified (retrieval/indexing/push_sync.py). Only the gateway's
        webhook identity may ask: its routes take no API key, so a key's principal, admin
        or not, never reaches this (and no key can have that principal)."""
        viewer = Viewer.current()
        if viewer.principal_id != WEBHOOK_PRINCIPAL or viewer.admin:
            raise PermissionDenied("SyncSource is the gateway's push webhooks' call only")
        keys = list(dict.fromkeys(request.urls))
        if not keys or len(keys) > SYNC_KEYS_MAX:
            raise InvalidArgument(f"urls: between 1 and {SYNC_KEYS_MAX} repository URLs")
        for key in keys:
            if not is_repository_key(key):
                raise InvalidArgument(
                    f"urls: {key[:100]!r} is not a normalised repository URL "
                    "(cograph_api.push_hooks.repository_key)"
                )
        # Compared with the stored branches, never handed to git: a name no repository
        # could be indexed on matches nothing.
        branch = check_text(request.branch, "branch", MAX_BRANCH_CHARS)
        if not branch:
            raise InvalidArgument("branch is required")
        commit = request.commit.strip().lower()
        if commit and not _COMMIT.match(commit):
            raise InvalidArgument("commit: 40 or 64 hexadecimal digits")
        self._require_space("indexing")
        outcome = await self._push_sync.sync(keys, branch, commit)
        return retrieval_pb2.SyncSourceResponse(
            queued=outcome.queued, up_to_date=outcome.up_to_date
        )

    # ---- anchors of notes (the commons' calls) ----

    async def ResolveAnchors(
        self, request: retrieval_pb2.ResolveAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.ResolveAnchorsResponse:
        """As the caller: the commons forwards the principal that posts or confirms."""
        if len(request.targets) > limits.ANCHORS_PER_POST_MAX:
            raise InvalidArgument(f"targets: at most {limits.ANCHORS_PER_POST_MAX}")
        targets = [check_target(i, given(t)) for i, t in enumerate(request.targets)]
        async with self._pool.acquire() as conn:
            nodes = await anchors.resolve(conn, targets, Viewer.current())
        return retrieval_pb2.ResolveAnchorsResponse(anchors=[_anchor_node(n) for n in nodes])

    async def ReadableRepositories(
        self,
        request: retrieval_pb2.ReadableRepositoriesRequest,
        context: grpc.aio.ServicerContext,
    ) -> retrieval_pb2.ReadableRepositoriesResponse:
        async with self._pool.acquire() as conn:
            found = await anchors.readable(
                conn, list(request.repository_ids), list(request.slugs), Viewer.current()
            )
        return retrieval_pb2.ReadableRepositoriesResponse(
            repositories=[
                retrieval_pb2.ReadableRepository(id=rid, slug=slug) for rid, slug in found
            ]
        )

    async def RecheckAnchors(
        self, request: retrieval_pb2.RecheckAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> retrieval_pb2.RecheckAnchorsResponse:
        """The commons' staleness checks, which compare anchors of every repository: only
        its own identity may ask (no key can have it, admin or not), and only here."""
        viewer = Viewer.current()
        if viewer.principal_id != COMMONS_PRINCIPAL or viewer.admin:
            raise PermissionDenied("RecheckAnchors is the commons' staleness check's call only")
        if len(request.repository_ids) > limits.ANCHOR_REPOSITORIES_MAX:
            raise InvalidArgument(f"repository_ids: at most {limits.ANCHOR_REPOSITORIES_MAX}")
        if len(request.anchors) > limits.ANCHORS_RECHECK_MAX:
            raise InvalidArgument(f"anchors: at most {limits.ANCHORS_RECHECK_MAX}")
        stored = [
            anchors.Stored(
                a.id, a.repository_id, a.qualified_name, a.path, a.signature_hash, a.body_hash
            )
            for a in request.anchors
        ]
        async with self._pool.acquire() as conn:
            repos = await anchors.generations(conn, list(request.repository_ids))
            checks = (await anchors.recheck(conn, stored))[1] if stored else []
        return retrieval_pb2.RecheckAnchorsResponse(
            repositories=[
                retrieval_pb2.RepositoryGeneration(
                    repository_id=r.id, generation=r.generation, commit=r.commit
                )
                for r in repos.values()
            ],
            checks=[
                retrieval_pb2.AnchorCheck(
                    id=c.id,
                    state=_ANCHOR_STATES[c.state],
                    current=_anchor_node(c.current) if c.current is not None else None,
                    commit=c.commit,
                    generation=c.generation,
                )
                for c in checks
            ],
        )


_ANCHOR_STATES = {
    "fresh": retrieval_pb2.ANCHOR_STATE_FRESH,
    "body_changed": retrieval_pb2.ANCHOR_STATE_BODY_CHANGED,
    "signature_changed": retrieval_pb2.ANCHOR_STATE_SIGNATURE_CHANGED,
    "moved": retrieval_pb2.ANCHOR_STATE_MOVED,
    "orphaned": retrieval_pb2.ANCHOR_STATE_ORPHANED,
}


def _wants_notes(
    request: retrieval_pb2.SearchRequest
    | retrieval_pb2.ReadFileRequest
    | retrieval_pb2.ReferencesRequest,
) -> bool:
    """The request's `notes` flag: true unless set false."""
    return not request.HasField("notes") or request.notes


def _anchor_node(node: anchors.Node) -> retrieval_pb2.AnchorNode:
    return retrieval_pb2.AnchorNode(
        repository_id=node.repository_id,
        repo=node.repo,
        qualified_name=node.qualified_name,
        path=node.path,
        start_line=node.start_line,
        end_line=node.end_line,
        kind=node.kind,
        signature_hash=node.signature_hash,
        body_hash=node.body_hash,
        commit=node.commit,
        generation=node.generation,
    )


def _scope_name(value: str, max_chars: int, what: str) -> str:
    name = value.strip()
    if len(name) > max_chars or _CONTROL.search(name):
        raise InvalidArgument(f"{what} is at most {max_chars} characters, without control ones")
    return name


def _required_repo(value: str) -> str:
    repo = _scope_name(value, limits.SLUG_MAX_CHARS, "repo").lower()
    if not repo:
        raise InvalidArgument("repo is required")
    return repo


def _access_target(
    request: retrieval_pb2.GrantAccessRequest
    | retrieval_pb2.RevokeAccessRequest
    | retrieval_pb2.SetVisibilityRequest,
) -> grants.Target:
    kind = request.WhichOneof("target") or ""
    return grants.checked_target(kind, getattr(request, kind) if kind else "")

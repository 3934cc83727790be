"""An index run of a repository or a collection, from source to committed rows.

Repository: fetch/clone -> list with skip rules -> compare content hashes with `files` ->
prepare/embed/write the changed files (pipeline) as a new generation -> publish in one
transaction: drop the replaced and removed files' rows, re-link edges, refresh the router
corpus and counts, switch the published generation (indexing/generations.py). A run that
stops early leaves the previous version searchable; the next run discards what it wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import logging
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from cograph_api.embedder_client import EmbedderUnavailable
from cograph_api.embedding_space import EmbeddingSpace, SpaceMismatch
from retrieval.indexing import generations
from retrieval.indexing import index_store as store
from retrieval.indexing.credentials import GitCredentials
from retrieval.indexing.jobs import Job, Progress
from retrieval.indexing.linking import compute_links
from retrieval.indexing.markdown import heading_tree, is_markdown
from retrieval.indexing.parsing import detect_language
from retrieval.indexing.pipeline import EmbedPipeline, Emit, PipelineStats, TextEmbedder, WorkUnit
from retrieval.indexing.prepare import FilePreparer, prepare_document, text_language
from retrieval.indexing.redaction import strip_secrets
from retrieval.indexing.refs import split_ref_slug
from retrieval.indexing.router_corpus import README_CHARS, collection_corpus, repository_corpus
from retrieval.indexing.snapshots import Snapshot, Unreadable, open_snapshot, read_listed
from retrieval.indexing.source_policy import (
    HostPolicy,
    LocalPolicy,
    parse_source,
    private_sources_policy,
)
from retrieval.indexing.sources import (
    GitLimits,
    SkipRules,
    SourceFile,
    materialize,
    remove_clone,
    walk_directory,
)
from retrieval.indexing.summaries import Summarizer
from retrieval.permissions import not_writable
from retrieval.settings import IndexSettings
from svckit.disk import DiskWatch
from svckit.errors import DiskFull

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RepositoryRequest:
    source: str
    slug: str
    branch: str = ""
    public: bool = False
    grants: tuple[str, ...] = ()  # read grants an admin asked for
    creator: str | None = None  # a non-admin creating it: gets a write grant on creation
    # The service's own runs (sync) of a remote source: its host is checked as for a key
    # that is not an admin, whoever queued the run, since a writer may have set it.
    public_hosts_only: bool = False


@dataclass(frozen=True)
class UploadedDocument:
    path: str
    content: str


@dataclass(frozen=True)
class CollectionRequest:
    name: str
    description: str = ""
    directory: str = ""
    documents: tuple[UploadedDocument, ...] = ()
    public: bool = False
    grants: tuple[str, ...] = ()  # read grants an admin asked for
    creator: str | None = None  # a non-admin creating it: gets a write grant on creation


def own_repository_request(source: str, slug: str, branch: str) -> RepositoryRequest:
    """A run the service queues on its own (sync, the re-index after an upgrade) of a
    repository indexed already: its stored source without any secret, and, for a remote
    source, its host checked with the authority of a key that is not an admin
    (`public_hosts_only`), whoever queues the run: a key with a write grant may have set
    that source, and a name it controls may resolve to an internal address by now."""
    source = strip_secrets(source)
    return RepositoryRequest(
        source=source,
        slug=slug,
        branch=branch,
        public_hosts_only=not parse_source(source).is_local,
    )


def request_to_json(request: RepositoryRequest | CollectionRequest) -> dict[str, Any]:
    """What a durable job stores to run `request` later, possibly in another process."""
    return dataclasses.asdict(request)


def repository_request(data: dict[str, Any]) -> RepositoryRequest:
    return RepositoryRequest(
        source=data["source"],
        slug=data["slug"],
        branch=data.get("branch", ""),
        public=bool(data.get("public", False)),
        grants=tuple(data.get("grants", ())),
        creator=data.get("creator"),
        public_hosts_only=bool(data.get("public_hosts_only", False)),
    )


def collection_request(data: dict[str, Any]) -> CollectionRequest:
    return CollectionRequest(
        name=data["name"],
        description=data.get("description", ""),
        directory=data.get("directory", ""),
        documents=tuple(
            UploadedDocument(d["path"], d["content"]) for d in data.get("documents", ())
        ),
        public=bool(data.get("public", False)),
        grants=tuple(data.get("grants", ())),
        creator=data.get("creator"),
    )


def file_language(path: str) -> str:
    if is_markdown(path):
        return "markdown"
    return detect_language(path) or text_language(path)


def _readme(snapshot: Snapshot, files: Sequence[SourceFile]) -> str:
    candidates = sorted(
        (f for f in files if "/" not in f.path and f.path.lower().startswith("readme")),
        key=lambda f: (not is_markdown(f.path), f.path),
    )
    if not candidates:
        return ""
    try:
        data = snapshot.load(candidates[0]).data
    except Unreadable:
        return ""
    return data.decode(errors="replace")[:README_CHARS]


class Indexer:
    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: TextEmbedder,
        settings: IndexSettings,
        summarizer: Summarizer,
        data_dir: Path,
        *,
        space: EmbeddingSpace | None = None,
        disk: DiskWatch | None = None,
    ) -> None:
        self._pool = pool
        # A run pauses while the data directory's disk is nearly full (svckit.disk).
        self._disk = disk
        self._embedder = embedder
        # The embedder's model against the stored vectors' (cograph_api.embedding_space):
        # a run refuses to write vectors of another model. None: not checked (tests).
        self._space = space
        self._settings = settings
        self._summarizer = summarizer
        self._data_dir = data_dir
        # Requests were checked against the local-source policy already; paths are checked
        # again right before they are read (mode "any": the caller's right was settled).
        self._local = LocalPolicy("any", data_dir, settings.local_roots, settings.protected_dirs)
        self._git = GitLimits(network_timeout_s=settings.git_timeout_s)
        # Where remote sources may point (RETRIEVAL_SOURCE_HOSTS, RETRIEVAL_PRIVATE_SOURCES).
        self._hosts = HostPolicy(
            private_sources_policy(settings.private_sources), settings.source_hosts
        )
        # The operator's git credentials (RETRIEVAL_CREDENTIALS_DIR), read at each use.
        self._credentials = GitCredentials(settings.credentials_dir)

    @property
    def settings(self) -> IndexSettings:
        return self._settings

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def host_policy(self) -> HostPolicy:
        return self._hosts

    @property
    def credentials(self) -> GitCredentials:
        return self._credentials

    def _pipeline(self, progress: Progress) -> EmbedPipeline:
        def on_embedded(count: int) -> None:
            progress.embeddings_done += count

        phase_before_wait = [progress.phase]

        def on_waiting(waiting: bool) -> None:
            if waiting:
                phase_before_wait[0] = progress.phase
                progress.phase = "waiting for the embedder"
            else:
                progress.phase = phase_before_wait[0]

        s = self._settings
        return EmbedPipeline(
            self._embedder,
            batch_size=s.embed_batch,
            concurrency=s.embed_concurrency,
            timeout_s=s.embed_timeout_s,
            max_chars=s.embed_max_chars,
            write_group=s.write_group,
            wait_s=s.embedder_wait_s,
            on_embedded=on_embedded,
            on_waiting=on_waiting,
        )

    async def _check_space(self) -> None:
        """Refuses a run at once when the embedder's model is not the stored vectors'."""
        if self._space is None:
            return
        try:
            reason = await self._space.refresh()
        except EmbedderUnavailable:
            return  # the pipeline waits for it (RETRIEVAL_EMBEDDER_WAIT_S) and checks then
        if reason is not None:
            raise SpaceMismatch(f"refusing to index: {reason}")

    async def _wait_for_room(self, progress: Progress) -> None:
        """Pauses the run while the disk is nearly full, saying so in its phase, and fails
        it (DiskFull, naming the disk) after RETRIEVAL_DISK_WAIT_S; resumes by itself."""
        disk = self._disk
        if disk is None or disk.settings.min_free_bytes <= 0:
            return
        state = disk.state()
        if not state.low:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.disk_wait_s
        before = progress.phase
        log.warning("indexing paused: disk nearly full", extra={"free_bytes": state.free_bytes})
        while state.low:
            progress.phase = f"paused: {state.describe(disk.settings)}"
            if loop.time() >= deadline:
                raise DiskFull(
                    f"indexing stopped after waiting {self._settings.disk_wait_s:g} s: "
                    f"{state.describe(disk.settings)}"
                )
            await asyncio.sleep(max(disk.settings.check_s, 0.2))
            state = disk.state()
        progress.phase = before
        log.info("indexing resumed: disk has room", extra={"free_bytes": state.free_bytes})

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection in a transaction that may write vectors: the embedding space's
        record is held (or recorded, on a database without vectors) until it commits."""
        async with self._pool.acquire() as conn, conn.transaction():
            space = self._space
            if space is not None:
                identity = space.embedder_identity
                if identity is None:  # not reached yet (tests hand in their own embedder)
                    with contextlib.suppress(EmbedderUnavailable):
                        await space.refresh()
                    identity = space.embedder_identity
                if identity is not None:
                    await space.hold_for_write(conn, identity)
            yield conn

    # ------------------------------------------------------------ repositories

    async def forget_repository(self, slug: str) -> None:
        """Removes the clone kept for a deleted repository (its rows are gone already)."""
        await asyncio.to_thread(remove_clone, self._data_dir, slug)

    async def index_repository(self, request: RepositoryRequest, job: Job) -> PipelineStats:
        progress = job.progress
        await self._check_space()
        await self._wait_for_room(progress)
        # The source is checked again against the host policy as the job's requester: the
        # policy may have changed since the request, and so may the host's addresses. The
        # clone or fetch then runs with the configuration the check returned (https pinned
        # to the addresses checked) and the source's registered credential. A secret that
        # an older release let into a source is stripped first: never used, never stored.
        source = strip_secrets(request.source)
        pinned = await self._hosts.check(
            source, admin=job.requester.admin and not request.public_hosts_only
        )
        auth = (
            await asyncio.to_thread(self._credentials.auth_for, source)
            if not parse_source(source).is_local
            else None
        )
        progress.phase = "fetching"
        checkout = await asyncio.to_thread(
            functools.partial(
                materialize,
                source,
                request.slug,
                request.branch,
                self._data_dir,
                local=self._local,
                limits=self._git,
                network=pinned,
                auth=auth,
            )
        )
        progress.phase = "listing"
        snapshot = open_snapshot(checkout, SkipRules(self._settings.max_file_bytes))
        listing = await asyncio.to_thread(snapshot.list)
        progress.skipped.update(listing.skipped)
        progress.files_seen = len(listing.files)
        progress.files_by_language.update(file_language(f.path) for f in listing.files)

        parent, ref = split_ref_slug(request.slug)
        async with self._pool.acquire() as conn, conn.transaction():
            if ref:
                # An indexed ref: a child row of the repository (indexing/refs.py), which
                # has its access; the request carries no grants and creates no repository.
                repository_id = await store.upsert_ref(conn, parent, ref, source, checkout.kind)
            else:
                repository_id, created = await store.upsert_repository(
                    conn, request.slug, source, checkout.kind, request.public
                )
                if request.creator and not created:  # taken meanwhile: not the creator's
                    raise not_writable("repository", request.slug)
            await store.add_grants(conn, request.grants, repository_id=repository_id)
            if request.creator:
                await store.add_grants(
                    conn, [request.creator], repository_id=repository_id, role="write"
                )
            # Drops what an interrupted run left unpublished; its files count as changed.
            generation = await generations.begin(conn, repository_id)
            stored = await store.file_hashes(conn, repository_id)
            relink = await store.needs_linking(conn, repository_id)
        changed = [f for f in listing.files if stored.get(f.path) != f.content_hash]
        listed = {f.path for f in listing.files}
        removed = sorted(path for path in stored if path not in listed)
        progress.files_total = len(changed)
        progress.files_unchanged = len(listing.files) - len(changed)
        if changed or removed:
            async with self._pool.acquire() as conn:
                await store.mark_needs_linking(conn, repository_id)

        progress.phase = "indexing"
        preparer = FilePreparer(
            snapshot,
            max_embed_chars=self._settings.embed_max_chars,
            code_text=self._settings.code_embed_text,
        )
        vanished: list[str] = []
        stats = await self._run_files(
            repository_id, generation, changed, preparer, progress, vanished=vanished
        )
        # A file that could not be read again as listed (a plain directory's file swapped
        # for a link meanwhile) is not indexed, and neither is its earlier version.
        removed = sorted({*removed, *(path for path in vanished if path in stored)})

        progress.phase = "linking"
        # Publication: one transaction replaces the previous version's rows with this
        # run's, re-links and switches the published generation (indexing/generations.py).
        async with self._pool.acquire() as conn, conn.transaction():
            await generations.publish_rows(conn, repository_id, generation, removed)
            progress.files_removed = len(removed)
            if changed or removed or relink:
                graph = await store.load_link_graph(conn, repository_id)
                edge_ids, targets = await asyncio.to_thread(compute_links, graph.nodes, graph.edges)
                await store.set_edge_targets(conn, edge_ids, targets)
            readme = await asyncio.to_thread(_readme, snapshot, listing.files)
            names = await store.module_level_names(conn, repository_id)
            paths = await store.file_paths(conn, repository_id)
            # The router routes to repositories, never to one of their refs: a ref's row
            # keeps no terms, so questions are not routed to it twice.
            terms = (
                set()
                if ref
                else repository_corpus(
                    request.slug,
                    checkout.branch,
                    readme,
                    [(r["qualified_name"], r["path"], r["is_module"]) for r in names],
                    paths,
                )
            )
            await store.finish_repository(
                conn,
                repository_id,
                branch=checkout.branch,
                commit=checkout.commit,
                readme_excerpt=readme,
                terms=terms,
                generation=generation,
            )
        log.info(
            "repository indexed",
            extra={
                "slug": request.slug,
                "changed": len(changed),
                "removed": len(removed),
                "embedded": stats.texts,
                "embed_busy_share": round(stats.busy_share, 3),
            },
        )
        return stats

    async def _run_files(
        self,
        repository_id: int,
        generation: int,
        changed: Sequence[SourceFile],
        preparer: FilePreparer,
        progress: Progress,
        *,
        vanished: list[str],
    ) -> PipelineStats:
        loop = asyncio.get_running_loop()
        pending = iter(changed)
        workers = self._settings.parse_workers

        async def produce(emit: Emit) -> None:
            with ThreadPoolExecutor(workers, thread_name_prefix="prepare") as pool:

                async def worker() -> None:
                    for source in pending:  # shared iterator: each file goes to one worker
                        try:
                            prepared = await loop.run_in_executor(pool, preparer.prepare, source)
                        except Unreadable as err:
                            progress.skipped[err.reason] += 1
                            vanished.append(source.path)
                            continue
                        summaries = await self._summarizer.summarize(prepared.summary_inputs)
                        unit = prepared.to_unit(summaries)
                        progress.embeddings_total += len(unit.texts)
                        await emit(unit)

                async with asyncio.TaskGroup() as group:
                    for _ in range(workers):
                        group.create_task(worker())

        async def write(units: Sequence[WorkUnit]) -> None:
            await self._wait_for_room(progress)
            async with self._writing() as conn:
                await store.write_files(
                    conn,
                    repository_id,
                    units,
                    generation=generation,
                )
            for unit in units:
                payload = unit.payload
                progress.files_done += 1
                progress.nodes += len(payload.nodes)
                progress.edges += len(payload.edges)
                progress.chunks += len(payload.docs)
                if payload.nodes:
                    progress.nodes_by_language[payload.language] += len(payload.nodes)

        return await self._pipeline(progress).run(produce, write)

    # ------------------------------------------------------------ collections

    async def index_collection(self, request: CollectionRequest, job: Job) -> PipelineStats:
        progress = job.progress
        await self._check_space()
        await self._wait_for_room(progress)
        progress.phase = "listing"
        documents = await asyncio.to_thread(self._collection_documents, request, progress)
        progress.files_seen = len(documents)
        progress.files_by_language["markdown"] = len(documents)
        async with self._pool.acquire() as conn, conn.transaction():
            collection_id, description, created = await store.upsert_collection(
                conn, request.name, request.description, request.directory, request.public
            )
            if request.creator and not created:
                raise not_writable("collection", request.name)
            await store.add_grants(conn, request.grants, collection_id=collection_id)
            if request.creator:
                await store.add_grants(
                    conn, [request.creator], collection_id=collection_id, role="write"
                )
            # The run's generation; what a stopped run left is discarded (generations.py).
            generation = await generations.begin_collection(conn, collection_id)
            stored = await store.document_hashes(conn, collection_id)
        hashed = {
            path: (text, hashlib.sha256(text.encode()).hexdigest(), when)
            for path, (text, when) in documents.items()
        }
        changed = sorted(p for p, (_t, h, _w) in hashed.items() if stored.get(p) != h)
        removed = sorted(p for p in stored if p not in hashed)
        progress.files_total = len(changed)
        progress.files_unchanged = len(hashed) - len(changed)

        progress.phase = "indexing"
        max_chars = self._settings.embed_max_chars

        async def produce(emit: Emit) -> None:
            for path in changed:
                text, digest, when = hashed[path]
                prepared = prepare_document(path, text, digest, when, max_chars)
                unit = prepared.to_unit([])
                progress.embeddings_total += len(unit.texts)
                await emit(unit)

        async def write(units: Sequence[WorkUnit]) -> None:
            await self._wait_for_room(progress)
            async with self._writing() as conn:
                await store.write_documents(conn, collection_id, units, generation)
            progress.files_done += len(units)
            progress.chunks += sum(len(u.payload.docs) for u in units)

        stats = await self._pipeline(progress).run(produce, write)
        progress.phase = "linking"
        tree = heading_tree((path, text) for path, (text, _h, _w) in hashed.items())
        # One transaction: the old chunks and removed documents go, the staged texts move
        # into place, and the published generation switches.
        async with self._pool.acquire() as conn, conn.transaction():
            await generations.publish_collection_rows(conn, collection_id, generation, removed)
            progress.files_removed = len(removed)
            await store.finish_collection(
                conn,
                collection_id,
                heading_tree=tree,
                terms=collection_corpus(request.name, description, tree),
                generation=generation,
            )
        return stats

    def _collection_documents(
        self, request: CollectionRequest, progress: Progress
    ) -> dict[str, tuple[str, datetime]]:
        """path -> (markdown text, updated time) from the directory or the uploads."""
        if not request.directory:
            now = datetime.now(UTC)
            return {d.path: (d.content, now) for d in request.documents if is_markdown(d.path)}
        root = self._local.check_directory(request.directory, admin=True, what="directory")
        documents: dict[str, tuple[str, datetime]] = {}
        for path in walk_directory(root, progress.skipped):
            if not is_markdown(path):
                progress.skipped["not_markdown"] += 1
                continue
            # Read once, never through a link (local_files): a document swapped for a link
            # to the service's secrets while the job runs is refused, not read.
            try:
                read = read_listed(root, path, max_bytes=self._settings.max_file_bytes)
            except Unreadable as err:
                progress.skipped[err.reason] += 1
                continue
            documents[path] = (read.data.decode(errors="replace"), read.modified)
        return documents

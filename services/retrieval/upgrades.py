"""Re-indexing, in the background, what an earlier release indexed without data this one
stores.

A migration that adds stored data (0010: file texts) cannot compute it in SQL: it marks
the repositories and collections concerned (`reindex_reason`) and clears the hashes of the
files that lack it. On start the service queues an index job for each one marked that has
a source to read again, as the service itself (an admin requester: the target was indexed
by an operator already); the run re-reads exactly the cleared files, and publishing clears
the mark (index_store.finish_repository / finish_collection). Until then the repository
reports `stale` with the reason. A remote source's host is checked as for a key that is not
an admin (indexer.own_repository_request), so a repository an admin indexed from an
internal host keeps its mark until an admin indexes it again. Several replicas starting
at once queue one job per target: a second submission joins the queued or running one.
"""

from __future__ import annotations

import logging

import asyncpg

from cograph_api.access_rules import Viewer
from retrieval.indexing.indexer import CollectionRequest, own_repository_request, request_to_json
from retrieval.indexing.jobs import JobManager

log = logging.getLogger(__name__)

# The requester of the service's own jobs, as job listings show it.
UPGRADE_REQUESTER = Viewer("cograph-upgrade", True)


async def queue_reindex_after_upgrade(pool: asyncpg.Pool, jobs: JobManager) -> int:
    """Queues the re-index of every marked repository and directory collection; returns
    how many were queued (or joined)."""
    async with pool.acquire() as conn:
        repositories = await conn.fetch(
            "SELECT slug, source, branch FROM repositories WHERE reindex_reason <> '' ORDER BY slug"
        )
        collections = await conn.fetch(
            "SELECT name, description, source FROM collections "
            "WHERE reindex_reason <> '' AND source <> '' ORDER BY name"
        )
    for row in repositories:
        request = own_repository_request(row["source"], row["slug"], row["branch"])
        await jobs.submit("repository", row["slug"], request_to_json(request), UPGRADE_REQUESTER)
    for row in collections:
        collection = CollectionRequest(
            name=row["name"], description=row["description"], directory=row["source"]
        )
        await jobs.submit("collection", row["name"], request_to_json(collection), UPGRADE_REQUESTER)
    queued = len(repositories) + len(collections)
    if queued:
        log.info(
            "re-indexing what an earlier release indexed without file texts",
            extra={"repositories": len(repositories), "collections": len(collections)},
        )
    return queued

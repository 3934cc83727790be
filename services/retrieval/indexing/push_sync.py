"""Re-indexing what a push webhook reports: the gateway's `/api/hooks/github` and
`/api/hooks/gitlab` verify a delivery and call SyncSource with the pushed repository's URLs
(normalised, cograph_api.push_hooks.repository_key), its branch and the commit it points to.

The repositories that match are those whose stored source has one of those keys (compared
whole, never as a substring) and whose indexed branch is the pushed one. Each is queued the
way sync.py queues a source that moved: an ordinary index job of its stored source
(indexer.own_repository_request, so a remote host is checked with the authority of a key
that is not an admin, at once and again when the job starts), requested by
WEBHOOK_REQUESTER. A repository already indexed at the pushed commit is left alone (a
redelivered or replayed event costs nothing). A queued job is joined, not doubled: it
fetches when it starts, after the push. A running job may have fetched before the push, so
it is not joined either: the repository is followed until that run ends, and queued then
unless the run indexed the pushed commit (`_follow`). That memory lives in this process;
if it stops meanwhile, the next sync check (RETRIEVAL_SYNC_INTERVAL_S) finds the branch
moved. `last_synced_at` is written when a run the webhook queued publishes, as for the
sync's own (sync.recording_syncs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from cograph_api.access_rules import Viewer
from cograph_api.push_hooks import WEBHOOK_PRINCIPAL, repository_key
from retrieval.indexing.indexer import own_repository_request, request_to_json
from retrieval.indexing.jobs import JobManager
from retrieval.indexing.redaction import strip_secrets

log = logging.getLogger(__name__)

# Who queues the webhooks' jobs, as job listings show it: an admin, like the sync's
# requester, since an operator or a permitted key indexed each repository already.
WEBHOOK_REQUESTER = Viewer(WEBHOOK_PRINCIPAL, True)
# How often a followed repository's running job is looked at, in seconds.
FOLLOW_POLL_S = 2.0

# Every indexed git repository on the branch; the keys are compared in Python, since a
# source's key is not stored (a table scan of one branch's rows, per delivery).
_ON_BRANCH = """
SELECT slug, source, branch, commit_sha FROM repositories
WHERE indexed_at IS NOT NULL AND source_kind <> 'dir' AND branch = $1
ORDER BY slug
"""


@dataclass(frozen=True)
class Outcome:
    queued: list[str] = field(default_factory=list)  # slugs whose re-index is queued
    up_to_date: list[str] = field(default_factory=list)  # already indexed at the commit


@dataclass
class _Followed:
    job_id: str  # the run in progress when the push came
    commit: str  # the pushed commit ('' when the push named none)
    request: dict[str, Any]


def source_key(source: str) -> str | None:
    """The key of a stored source (without any secret an older release let in)."""
    return repository_key(strip_secrets(source))


class PushSync:
    def __init__(
        self, pool: asyncpg.Pool, jobs: JobManager, *, follow_poll_s: float = FOLLOW_POLL_S
    ) -> None:
        self._pool = pool
        self._jobs = jobs
        self._follow_poll_s = follow_poll_s
        self._followed: dict[str, _Followed] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def following(self) -> frozenset[str]:
        """Slugs waiting for a run in progress to end (for the tests)."""
        return frozenset(self._followed)

    async def matching(self, keys: Collection[str], branch: str) -> list[asyncpg.Record]:
        """The indexed repositories on `branch` whose source has one of `keys`."""
        wanted = set(keys)
        rows = await self._pool.fetch(_ON_BRANCH, branch)
        return [row for row in rows if source_key(row["source"]) in wanted]

    async def sync(self, keys: Collection[str], branch: str, commit: str) -> Outcome:
        outcome = Outcome()
        for row in await self.matching(keys, branch):
            slug = row["slug"]
            if commit and row["commit_sha"] == commit:
                outcome.up_to_date.append(slug)
                continue
            request = request_to_json(own_repository_request(row["source"], slug, row["branch"]))
            active = await self._jobs.active_job("repository", slug)
            if active is not None and active.state == "running":
                self._follow(slug, _Followed(active.id, commit, request))
                how = "after the run in progress"
            else:
                job = await self._jobs.submit("repository", slug, request, WEBHOOK_REQUESTER)
                how = f"job {job.id}"
            log.info(
                "push webhook: re-indexing",
                extra={"target": slug, "branch": branch, "commit": commit, "queued": how},
            )
            outcome.queued.append(slug)
        return outcome

    def _follow(self, slug: str, followed: _Followed) -> None:
        """Queues `slug` once the run `followed.job_id` ends, unless it indexed the commit.
        A later push for a repository already followed replaces the commit awaited."""
        self._followed[slug] = followed
        task = self._tasks.get(slug)
        if task is None or task.done():
            self._tasks[slug] = asyncio.create_task(self._after_run(slug), name=f"push-{slug}")

    async def _after_run(self, slug: str) -> None:
        try:
            while True:
                await asyncio.sleep(self._follow_poll_s)
                followed = self._followed[slug]
                try:
                    if await self._run_ended(slug, followed):
                        return
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # the database away for now: look again later
                    log.warning(
                        "push webhook: cannot look at the run in progress",
                        extra={"target": slug, "error": str(err)},
                    )
        finally:
            self._followed.pop(slug, None)
            self._tasks.pop(slug, None)

    async def _run_ended(self, slug: str, followed: _Followed) -> bool:
        """False while the followed run goes on; else queues the re-index if it is still
        needed and returns True."""
        active = await self._jobs.active_job("repository", slug)
        if active is not None:
            # The same run still going (or retrying), or another job, queued or started
            # after the push, which fetches what the push brought.
            return active.id != followed.job_id
        row = await self._pool.fetchrow("SELECT commit_sha FROM repositories WHERE slug = $1", slug)
        if row is None or (followed.commit and row["commit_sha"] == followed.commit):
            return True  # deleted meanwhile, or the run indexed the pushed commit
        job = await self._jobs.submit("repository", slug, followed.request, WEBHOOK_REQUESTER)
        log.info(
            "push webhook: re-indexing after the run in progress",
            extra={"target": slug, "commit": followed.commit, "job": job.id},
        )
        return True

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

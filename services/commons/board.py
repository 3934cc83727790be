"""The notes board's operations: who may do what, and search's pipeline (parse, embed or fail
loudly, score in SQL, log off the critical path). The servicer only translates protobuf."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import grpc

from cograph.commons.v1 import commons_pb2
from cograph_api.anchors import check_scope
from cograph_api.cursors import CursorCodec
from cograph_api.embedder_client import EmbedderClient, EmbedderUnavailable
from cograph_api.embedding_space import MISMATCH_REASON, CheckedEmbedder, SpaceMismatch
from commons.anchor_watch import AnchorWatch, CheckOutcome, unavailable
from commons.anchors import AnchorDesk, targets_of
from commons.embedding import MAX_EMBED_CHARS, DetachedTasks, NoteEmbedder
from commons.listing import next_cursor, read_cursor, validate_list_page
from commons.models import (
    Anchor,
    AnchoredNote,
    Comment,
    ModerationEntry,
    Post,
    PostSummary,
    Profile,
    SearchHit,
    VoteOutcome,
)
from commons.profiles import DISPLAY_NAME_TAKEN, validate_display_name
from commons.query import like_pattern, parse_query
from commons.ranking import RankingWeights, Strategy, choose_strategy
from commons.store import (
    Actor,
    AnchorScope,
    CommonsStore,
    DeleteOutcome,
    SearchParams,
    VoteRefusal,
)
from commons.validation import (
    Limits,
    parse_post_id,
    validate_comment,
    validate_log_page,
    validate_post,
    validate_query,
    validate_reason,
    validate_review,
)
from svckit.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from svckit.requestctx import Principal, current_principal

log = logging.getLogger(__name__)

SEMANTIC_SEARCH_UNAVAILABLE = "semantic_search_unavailable"
# PERMISSION_DENIED's reason (the REST error code) when an author votes on their own note.
OWN_POST_VOTE = "own_post_vote"


@dataclass(frozen=True)
class SearchConfig:
    limit: int
    snippet: int
    weights: RankingWeights
    embed_timeout_s: float
    two_stage_threshold: int
    two_stage_k: int
    note_count_ttl_s: float
    filter_first_max: int  # phrases matching at most this many notes: the filtered strategy


def _writer() -> str:
    return _signed_in().id


def _signed_in() -> Principal:
    principal = current_principal()
    if principal is None:
        raise Unauthenticated("writing to the commons needs an authenticated principal")
    return principal


def _moderator() -> str:
    """The admin principal moderating; checked before the target is looked up, so a
    non-admin learns nothing about which notes or comments exist."""
    principal = _signed_in()
    if not principal.admin:
        raise PermissionDenied("moderation needs an admin")
    return principal.id


def _viewer() -> tuple[str | None, bool]:
    """Who reads (None: anonymous) and whether they are an admin: hidden notes and comments
    exist only for their author and admins."""
    principal = current_principal()
    return (principal.id, principal.admin) if principal is not None else (None, False)


async def run_search(
    store: CommonsStore, params: SearchParams, filter_first_max: int
) -> tuple[Strategy, list[SearchHit]]:
    """Runs a search planned with `params.strategy`, adjusted for quoted phrases; returns
    the strategy that answered and the hits."""
    strategy = params.strategy
    # The HNSW scan must read about (notes / matching) rows per candidate it keeps; a
    # selective phrase is answered faster, and exactly, from its own few notes.
    if (
        strategy is Strategy.TWO_STAGE
        and params.patterns
        and await store.count_matching(params.patterns, filter_first_max) <= filter_first_max
    ):
        strategy = Strategy.FILTERED
    hits = await store.search(replace(params, strategy=strategy))
    if strategy is Strategy.TWO_STAGE and params.patterns and len(hits) < params.limit:
        # The iterative index scan can still stop (pgvector's hnsw.max_scan_tuples) before
        # K notes pass the phrases, so a short list may be missing matches; the exact scan
        # over the filtered notes is the correct answer.
        strategy = Strategy.FILTERED
        hits = await store.search(replace(params, strategy=strategy))
    return strategy, hits


def _deleted(outcome: DeleteOutcome, kind: str, target_id: str) -> None:
    """Raises what a refused deletion means to the caller."""
    if outcome is DeleteOutcome.NOT_FOUND:
        raise NotFound(f"{kind} {target_id} not found")
    if outcome is DeleteOutcome.NOT_AUTHOR:
        raise PermissionDenied(f"only its author or an admin may delete a {kind}")
    if outcome is DeleteOutcome.NEEDS_REASON:
        raise InvalidArgument(f"reason: required to delete another author's {kind}")


class NotesBoard:
    def __init__(
        self,
        store: CommonsStore,
        client: EmbedderClient | CheckedEmbedder,
        note_embedder: NoteEmbedder,
        limits: Limits,
        search: SearchConfig,
        *,
        cursors: CursorCodec,  # signs the listing's paging cursors
    ) -> None:
        self._store = store
        # Set by attach_anchors; without them notes cannot be anchored.
        self._anchors: AnchorDesk | None = None
        self._watch: AnchorWatch | None = None
        self._cursors = cursors
        self._client = client
        self._embedder = note_embedder
        self._limits = limits
        self._search = search
        self._note_count: tuple[float, int] | None = None  # (monotonic time, count)
        self.log_tasks = DetachedTasks()

    def attach_anchors(self, desk: AnchorDesk, watch: AnchorWatch) -> None:
        """Lets notes be anchored to code (resolved by `desk`, re-checked by `watch`)."""
        self._anchors = desk
        self._watch = watch

    def _desk(self) -> AnchorDesk:
        if self._anchors is None:
            raise FailedPrecondition("anchors: this commons has no code index to resolve them")
        return self._anchors

    async def create_post(
        self,
        title: str,
        body: str,
        tags: Sequence[str],
        anchors: Sequence[commons_pb2.AnchorTarget] = (),
    ) -> Post:
        """Stores the note (and its anchors, resolved as the caller first: a refused anchor
        stores nothing) and returns; the vector is written by a detached task."""
        author = _writer()
        new = validate_post(title, body, list(tags), self._limits)
        resolved = await self._desk().resolve(targets_of(anchors)) if anchors else []
        post = await self._store.create_post(author, new, resolved)
        self._embedder.embed_later(post.id, post.title, post.body)
        return post

    async def get_post(self, post_id: str) -> Post:
        """The note with the anchors the reader may see (in repositories they may read)."""
        post = await self._store.get_post(parse_post_id(post_id), *_viewer())
        if post is None:
            raise NotFound(f"post {post_id} not found")
        if post.anchors:
            post = replace(post, anchors=await self._desk().visible(post.anchors))
        return post

    async def add_anchors(self, post_id: str, anchors: Sequence[commons_pb2.AnchorTarget]) -> Post:
        """Anchors a posted note: its author or an admin, who must read the code."""
        post = await self.get_post(post_id)
        await self._desk().add(post.id, anchors, post.author)
        return await self.get_post(post_id)

    async def confirm_anchor(self, post_id: str, anchor_id: str) -> Anchor:
        """Its note's author or an admin marks an anchor fresh at the current commit."""
        principal = _signed_in()
        post = await self.get_post(post_id)
        if not principal.admin and principal.id != post.author:
            raise PermissionDenied("only its author or an admin may confirm an anchor")
        return await self._desk().confirm(post.id, parse_post_id(anchor_id, "anchor_id"))

    async def check_anchors(self) -> CheckOutcome:
        """Runs the anchors' staleness check now (admins only)."""
        _moderator()
        if self._watch is None:
            raise FailedPrecondition("anchors: this commons has no code index to check them")
        try:
            return await self._watch.check()
        except grpc.aio.AioRpcError as err:
            raise Unavailable(unavailable(err)) from None

    async def review_anchors(
        self, repo: str, status: str | None, limit: int
    ) -> tuple[list[AnchoredNote], bool]:
        """Anchors of a readable repository whose code changed (or with `status`), with
        their notes; and whether more matched than `limit`."""
        slug, wanted, size = validate_review(repo, status, limit)
        # One more than asked tells whether more matched.
        rows = await self._desk().review(slug, wanted, size + 1)
        return rows[:size], len(rows) > size

    def _actor(self, reason: str) -> Actor:
        """The deleting principal; a reason, when given, is checked whoever gives it."""
        principal = _signed_in()
        given = validate_reason(reason, self._limits) if reason.strip() else None
        return Actor(principal.id, principal.admin, given)

    async def delete_post(self, post_id: str, reason: str = "") -> None:
        """Its author deletes a note; an admin deletes anyone's, with a reason (logged)."""
        actor = self._actor(reason)
        outcome = await self._store.delete_post(parse_post_id(post_id), actor)
        _deleted(outcome, "post", post_id)

    async def delete_comment(self, comment_id: str, reason: str = "") -> None:
        """Its author deletes a comment; an admin deletes anyone's, with a reason (logged)."""
        actor = self._actor(reason)
        outcome = await self._store.delete_comment(parse_post_id(comment_id, "comment_id"), actor)
        _deleted(outcome, "comment", comment_id)

    async def set_post_hidden(self, post_id: str, hidden: bool, reason: str) -> bool:
        """Hides (out of search and every non-admin's reads at once) or unhides a note;
        whether it changed. Admins only; the action and reason are logged."""
        moderator = _moderator()
        text = validate_reason(reason, self._limits)
        changed = await self._store.set_post_hidden(parse_post_id(post_id), moderator, hidden, text)
        if changed is None:
            raise NotFound(f"post {post_id} not found")
        return changed

    async def set_comment_hidden(self, comment_id: str, hidden: bool, reason: str) -> bool:
        """Hides or unhides a comment; whether it changed. Admins only; logged."""
        moderator = _moderator()
        text = validate_reason(reason, self._limits)
        changed = await self._store.set_comment_hidden(
            parse_post_id(comment_id, "comment_id"), moderator, hidden, text
        )
        if changed is None:
            raise NotFound(f"comment {comment_id} not found")
        return changed

    async def moderation_log(
        self, limit: int, before_id: int
    ) -> tuple[list[ModerationEntry], int | None]:
        """A page of the moderation log, newest first (admins only)."""
        _moderator()
        size, cursor = validate_log_page(limit, before_id, self._limits)
        return await self._store.moderation_log(size, cursor)

    async def list_posts(
        self, sort: str, tag: str, cursor: str, limit: int
    ) -> tuple[list[PostSummary], str]:
        """A page of notes in the order asked for, bodies snipped as in search, and the
        cursor of the next page ("" at the end). Hidden notes are listed to admins only:
        the listing is the board's front page, and a hidden note is off it for everyone
        else, its author included (as it is out of search)."""
        page = validate_list_page(sort, tag, limit)
        after = read_cursor(self._cursors, page, cursor)
        _, admin = _viewer()
        rows = await self._store.list_posts(page, after, self._search.snippet, admin)
        posts = rows[: page.size]
        more = len(rows) > page.size
        return posts, next_cursor(self._cursors, page, posts[-1]) if more else ""

    async def profile(self) -> Profile:
        """The caller's number and display name (both None for the anonymous and for a
        principal that has not written yet)."""
        viewer, _ = _viewer()
        if viewer is None:
            return Profile(None, None)
        return await self._store.profile(viewer)

    async def set_display_name(self, raw: str) -> Profile:
        """Sets the caller's display name, or clears it with a blank one."""
        principal = _writer()
        name = validate_display_name(raw)
        profile = await self._store.set_display_name(principal, name)
        if profile is None:
            raise AlreadyExists(
                "display_name: another contributor has this name", reason=DISPLAY_NAME_TAKEN
            )
        return profile

    async def vote(self, post_id: str, value: int) -> VoteOutcome:
        if value not in (-1, 0, 1):
            raise InvalidArgument("direction: must be up, down or none")
        principal = _signed_in()
        outcome = await self._store.vote(
            parse_post_id(post_id), principal.id, value, principal.admin
        )
        if outcome is VoteRefusal.NOT_FOUND:
            raise NotFound(f"post {post_id} not found")
        if outcome is VoteRefusal.OWN_POST:
            # A note's score is what other agents think of it; search ranks by it, so a
            # self-vote would let an author lift their own note (direction none is allowed).
            raise PermissionDenied(
                "direction: authors cannot vote on their own notes", reason=OWN_POST_VOTE
            )
        if value == 1 and self._anchors is not None:
            # Whoever finds the note right and may read its code confirms its anchors.
            await self._anchors.confirm_by_vote(outcome.post_id)
        return outcome

    async def add_comment(self, post_id: str, body: str) -> tuple[Comment, int]:
        principal = _signed_in()
        text = validate_comment(body, self._limits)
        added = await self._store.add_comment(
            parse_post_id(post_id), principal.id, text, principal.admin
        )
        if added is None:
            raise NotFound(f"post {post_id} not found")
        return added

    async def list_comments(self, post_id: str) -> list[Comment]:
        comments = await self._store.list_comments(parse_post_id(post_id), *_viewer())
        if comments is None:
            raise NotFound(f"post {post_id} not found")
        return comments

    async def _scope(self, repo: str, path: str, symbol: str) -> AnchorScope | None:
        """A search's scope, checked, with the id of its repository; NOT_FOUND when the
        caller cannot read it, the answer for a repository that does not exist."""
        scope = check_scope(repo, path, symbol)
        if scope is None:
            return None
        repository_id = await self._desk().readable_slug(scope.repo)
        return AnchorScope(repository_id, scope.path, scope.symbol)

    async def search(
        self, raw_query: str, repo: str = "", path: str = "", symbol: str = ""
    ) -> list[SearchHit]:
        """The best notes for the query; with a scope, only notes anchored there."""
        query = validate_query(raw_query, self._limits)
        parsed = parse_query(query)
        if not parsed.semantic_text:
            raise InvalidArgument("query: must not be empty")
        scope = await self._scope(repo, path, symbol)
        try:
            vector = await self._client.embed_one(
                parsed.semantic_text[:MAX_EMBED_CHARS], timeout=self._search.embed_timeout_s
            )
        except SpaceMismatch as err:
            # The query's vector would be compared with another model's: no answer at all,
            # like an outage, with the reason the caller needs to tell them apart.
            raise Unavailable(
                f"semantic search is unavailable: {err}", reason=MISMATCH_REASON
            ) from None
        except EmbedderUnavailable as err:
            # Never a keyword fallback: a plausible wrong answer is worse than "unavailable".
            log.warning("semantic search unavailable", extra={"error": str(err)})
            raise Unavailable(
                "semantic search is unavailable: the embedding backend did not answer within "
                f"{self._search.embed_timeout_s:g}s",
                reason=SEMANTIC_SEARCH_UNAVAILABLE,
            ) from None
        if scope is not None:
            # The scope's notes scored exactly, found from their anchors: the HNSW scan
            # would filter after the index and could return none of them.
            strategy = Strategy.FILTERED
        else:
            strategy = choose_strategy(
                await self._embedded_notes(), self._search.two_stage_threshold
            )
        params = SearchParams(
            vector=vector,
            patterns=[like_pattern(p) for p in parsed.phrases],
            limit=self._search.limit,
            snippet=self._search.snippet,
            weights=self._search.weights,
            strategy=strategy,
            k=self._search.two_stage_k,
            scope=scope,
        )
        strategy, hits = await run_search(self._store, params, self._search.filter_first_max)
        principal = current_principal()
        self.log_tasks.spawn(
            self._log_search(query, principal.id if principal else None, strategy, hits),
            name="commons-search-log",
        )
        return hits

    async def _log_search(
        self, query: str, principal_id: str | None, strategy: Strategy, hits: list[SearchHit]
    ) -> None:
        """Best-effort: runs after the response is on its way; failures are only logged."""
        try:
            await self._store.log_search(query, principal_id, strategy, hits)
        except Exception:
            log.warning("search log write failed", exc_info=True)

    async def _embedded_notes(self) -> int:
        """A cached note count: deciding the strategy must not cost a scan per search."""
        if self._search.two_stage_threshold == 0:
            return 0  # two-stage always; no need to count
        now = time.monotonic()
        cached = self._note_count
        if cached is not None and now - cached[0] < self._search.note_count_ttl_s:
            return cached[1]
        count = await self._store.note_count_estimate()
        self._note_count = (now, count)
        return count

"""CommonsService: protobuf in and out; rules live in board.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from cograph.common.v1 import common_pb2
from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph_api.anchors import CodeTarget
from commons.board import NotesBoard
from commons.code_notes import CodeNotes
from commons.models import (
    Anchor,
    AnchoredNote,
    Comment,
    ModerationEntry,
    Post,
    PostSummary,
    Profile,
    SearchHit,
)
from svckit import requestctx
from svckit.disk import DiskWatch
from svckit.replicas import EVERYONE, ReadRouter

_DIRECTION_TO_VALUE = {
    commons_pb2.VOTE_DIRECTION_UP: 1,
    commons_pb2.VOTE_DIRECTION_DOWN: -1,
    commons_pb2.VOTE_DIRECTION_NONE: 0,
}
_VALUE_TO_DIRECTION = {value: direction for direction, value in _DIRECTION_TO_VALUE.items()}
_ACTIONS = {
    "hide": commons_pb2.MODERATION_ACTION_HIDE,
    "unhide": commons_pb2.MODERATION_ACTION_UNHIDE,
    "delete": commons_pb2.MODERATION_ACTION_DELETE,
}
_SORTS = {
    commons_pb2.POST_SORT_UNSPECIFIED: "new",
    commons_pb2.POST_SORT_NEW: "new",
    commons_pb2.POST_SORT_TOP: "top",
}
_TARGETS = {
    "post": commons_pb2.MODERATION_TARGET_POST,
    "comment": commons_pb2.MODERATION_TARGET_COMMENT,
}


_ANCHOR_STATUSES = {
    "fresh": commons_pb2.ANCHOR_STATUS_FRESH,
    "body_changed": commons_pb2.ANCHOR_STATUS_BODY_CHANGED,
    "signature_changed": commons_pb2.ANCHOR_STATUS_SIGNATURE_CHANGED,
    "moved": commons_pb2.ANCHOR_STATUS_MOVED,
    "orphaned": commons_pb2.ANCHOR_STATUS_ORPHANED,
}
_STATUS_NAMES = {number: name for name, number in _ANCHOR_STATUSES.items()}


def _timestamp(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def post_message(post: Post) -> commons_pb2.Post:
    return commons_pb2.Post(
        id=str(post.id),
        contributor_no=post.contributor_no,
        title=post.title,
        body=post.body,
        tags=post.tags,
        score=post.score,
        comment_count=post.comment_count,
        created_at=_timestamp(post.created_at),
        searchable=post.searchable,
        hidden=post.hidden,
        author_name=post.author_name,
        anchors=[anchor_message(a) for a in post.anchors],
    )


def anchor_message(anchor: Anchor) -> commons_pb2.Anchor:
    moved = anchor.moved_to
    return commons_pb2.Anchor(
        id=str(anchor.id),
        repo=anchor.repo,
        symbol=anchor.symbol,
        qualified_name=anchor.qualified_name,
        path=anchor.path,
        start_line=anchor.start_line,
        end_line=anchor.end_line,
        kind=anchor.kind,
        status=_ANCHOR_STATUSES[anchor.status],
        commit=anchor.commit,
        checked_commit=anchor.checked_commit,
        checked_at=_timestamp(anchor.checked_at),
        moved_to=commons_pb2.AnchorPlace(
            path=moved.path,
            qualified_name=moved.qualified_name,
            start_line=moved.start_line,
            end_line=moved.end_line,
        )
        if moved is not None
        else None,
    )


def anchored_message(note: AnchoredNote) -> commons_pb2.AnchoredNote:
    return commons_pb2.AnchoredNote(
        post_id=str(note.post_id),
        title=note.title,
        score=note.score,
        anchor=anchor_message(note.anchor),
    )


def _hit_fields(hit: SearchHit) -> dict[str, Any]:
    """What a search result and a listed note both carry (a listed note is a hit)."""
    return {
        "id": str(hit.id),
        "contributor_no": hit.contributor_no,
        "title": hit.title,
        "body": hit.body,
        "body_truncated": hit.body_truncated,
        "body_chars": hit.body_chars,
        "tags": hit.tags,
        "score": hit.score,
        "comment_count": hit.comment_count,
        "created_at": _timestamp(hit.created_at),
        "author_name": hit.author_name,
    }


def result_message(hit: SearchHit) -> commons_pb2.SearchResult:
    return commons_pb2.SearchResult(**_hit_fields(hit))


def summary_message(post: PostSummary) -> commons_pb2.PostSummary:
    return commons_pb2.PostSummary(
        **_hit_fields(post), hidden=post.hidden, searchable=post.searchable
    )


def profile_message(profile: Profile) -> commons_pb2.Profile:
    # None leaves an optional field unset, which JSON renders as null.
    return commons_pb2.Profile(
        contributor_no=profile.contributor_no, display_name=profile.display_name
    )


def comment_message(comment: Comment) -> commons_pb2.Comment:
    return commons_pb2.Comment(
        id=str(comment.id),
        post_id=str(comment.post_id),
        contributor_no=comment.contributor_no,
        body=comment.body,
        created_at=_timestamp(comment.created_at),
        hidden=comment.hidden,
        author_name=comment.author_name,
    )


def entry_message(entry: ModerationEntry) -> commons_pb2.ModerationEntry:
    return commons_pb2.ModerationEntry(
        id=entry.id,
        principal_id=entry.principal_id,
        action=_ACTIONS[entry.action],
        target=_TARGETS[entry.target],
        target_id=str(entry.target_id),
        post_id=str(entry.post_id),
        target_author=entry.target_author,
        target_excerpt=entry.target_excerpt,
        reason=entry.reason,
        created_at=_timestamp(entry.created_at),
    )


class CommonsServicer(commons_pb2_grpc.CommonsServiceServicer):
    def __init__(
        self,
        board: NotesBoard,
        code_notes: CodeNotes,
        disk: DiskWatch | None = None,
        reads: ReadRouter | None = None,
    ) -> None:
        self._board = board
        self._code_notes = code_notes
        # Reads on replicas (svckit.replicas): each write below is recorded so that its
        # author reads it back, and moderation for every reader (a hidden note must not
        # be read from a replica that has not replayed the hiding).
        self._reads = reads
        # Posts, votes and comments stop while the disk is nearly full (svckit.disk);
        # reads, deletes and moderation go on (a delete frees room).
        self._disk = disk

    async def _wrote(self, *, everyone: bool = False) -> None:
        if self._reads is None:
            return
        principal = requestctx.current_principal()
        if principal is not None:
            await self._reads.wrote(principal.id)
        if everyone:
            await self._reads.wrote(EVERYONE)

    def _require_space(self, what: str) -> None:
        if self._disk is not None:
            self._disk.require_space(what)

    async def CreatePost(
        self, request: commons_pb2.CreatePostRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.CreatePostResponse:
        self._require_space("posting a note")
        post = await self._board.create_post(
            request.title, request.body, list(request.tags), list(request.anchors)
        )
        await self._wrote()
        return commons_pb2.CreatePostResponse(post=post_message(post))

    async def GetPost(
        self, request: commons_pb2.GetPostRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.GetPostResponse:
        post = await self._board.get_post(request.post_id)
        return commons_pb2.GetPostResponse(post=post_message(post))

    async def DeletePost(
        self, request: commons_pb2.DeletePostRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.DeletePostResponse:
        await self._board.delete_post(request.post_id, request.reason)
        await self._wrote(everyone=True)
        return commons_pb2.DeletePostResponse()

    async def VotePost(
        self, request: commons_pb2.VotePostRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.VotePostResponse:
        self._require_space("voting")
        # An unknown or unset direction maps to an out-of-range value the board rejects.
        outcome = await self._board.vote(
            request.post_id, _DIRECTION_TO_VALUE.get(request.direction, 99)
        )
        await self._wrote()
        return commons_pb2.VotePostResponse(
            post_id=str(outcome.post_id),
            score=outcome.score,
            direction=_VALUE_TO_DIRECTION[outcome.value],
        )

    async def CreateComment(
        self, request: commons_pb2.CreateCommentRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.CreateCommentResponse:
        self._require_space("commenting")
        comment, count = await self._board.add_comment(request.post_id, request.body)
        await self._wrote()
        return commons_pb2.CreateCommentResponse(
            comment=comment_message(comment), comment_count=count
        )

    async def ListComments(
        self, request: commons_pb2.ListCommentsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.ListCommentsResponse:
        comments = await self._board.list_comments(request.post_id)
        return commons_pb2.ListCommentsResponse(comments=[comment_message(c) for c in comments])

    async def SearchPosts(
        self, request: commons_pb2.SearchPostsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.SearchPostsResponse:
        hits = await self._board.search(request.query, request.repo, request.path, request.symbol)
        return commons_pb2.SearchPostsResponse(
            query=request.query, results=[result_message(h) for h in hits]
        )

    async def SetPostHidden(
        self, request: commons_pb2.SetPostHiddenRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.SetPostHiddenResponse:
        changed = await self._board.set_post_hidden(request.post_id, request.hidden, request.reason)
        await self._wrote(everyone=True)
        return commons_pb2.SetPostHiddenResponse(
            post_id=request.post_id.strip(), hidden=request.hidden, changed=changed
        )

    async def SetCommentHidden(
        self, request: commons_pb2.SetCommentHiddenRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.SetCommentHiddenResponse:
        changed = await self._board.set_comment_hidden(
            request.comment_id, request.hidden, request.reason
        )
        await self._wrote(everyone=True)
        return commons_pb2.SetCommentHiddenResponse(
            comment_id=request.comment_id.strip(), hidden=request.hidden, changed=changed
        )

    async def DeleteComment(
        self, request: commons_pb2.DeleteCommentRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.DeleteCommentResponse:
        await self._board.delete_comment(request.comment_id, request.reason)
        await self._wrote(everyone=True)
        return commons_pb2.DeleteCommentResponse()

    async def ListModerationLog(
        self, request: commons_pb2.ListModerationLogRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.ListModerationLogResponse:
        entries, next_before = await self._board.moderation_log(request.limit, request.before_id)
        return commons_pb2.ListModerationLogResponse(
            entries=[entry_message(e) for e in entries], next_before_id=next_before or 0
        )

    async def ListPosts(
        self, request: commons_pb2.ListPostsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.ListPostsResponse:
        # An unknown sort number maps to a name the board refuses, naming the field.
        sort = _SORTS.get(request.sort, str(request.sort))
        posts, cursor = await self._board.list_posts(
            sort, request.tag, request.cursor, request.limit
        )
        return commons_pb2.ListPostsResponse(
            posts=[summary_message(p) for p in posts], next_cursor=cursor
        )

    async def GetProfile(
        self, request: commons_pb2.GetProfileRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.GetProfileResponse:
        return commons_pb2.GetProfileResponse(profile=profile_message(await self._board.profile()))

    async def SetDisplayName(
        self, request: commons_pb2.SetDisplayNameRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.SetDisplayNameResponse:
        self._require_space("setting a display name")
        profile = await self._board.set_display_name(request.display_name)
        await self._wrote()
        return commons_pb2.SetDisplayNameResponse(profile=profile_message(profile))

    async def AddAnchors(
        self, request: commons_pb2.AddAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.AddAnchorsResponse:
        self._require_space("anchoring a note")
        post = await self._board.add_anchors(request.post_id, list(request.anchors))
        await self._wrote()
        return commons_pb2.AddAnchorsResponse(post=post_message(post))

    async def ConfirmAnchor(
        self, request: commons_pb2.ConfirmAnchorRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.ConfirmAnchorResponse:
        anchor = await self._board.confirm_anchor(request.post_id, request.anchor_id)
        await self._wrote()
        return commons_pb2.ConfirmAnchorResponse(anchor=anchor_message(anchor))

    async def ListAnchors(
        self, request: commons_pb2.ListAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.ListAnchorsResponse:
        # An unknown status number maps to a name the board refuses, naming the field.
        status = _STATUS_NAMES.get(request.status, str(request.status)) if request.status else None
        notes, truncated = await self._board.review_anchors(request.repo, status, request.limit)
        return commons_pb2.ListAnchorsResponse(
            anchors=[anchored_message(n) for n in notes], truncated=truncated
        )

    async def CheckAnchors(
        self, request: commons_pb2.CheckAnchorsRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.CheckAnchorsResponse:
        outcome = await self._board.check_anchors()
        return commons_pb2.CheckAnchorsResponse(
            repositories=outcome.repositories, checked=outcome.checked, changed=outcome.changed
        )

    async def NotesForCode(
        self, request: commons_pb2.NotesForCodeRequest, context: grpc.aio.ServicerContext
    ) -> commons_pb2.NotesForCodeResponse:
        targets = [
            CodeTarget(t.repo, t.path, t.qualified_name, t.start_line, t.end_line)
            for t in request.targets
        ]
        found = await self._code_notes.for_code(targets, request.per_target)
        return commons_pb2.NotesForCodeResponse(
            targets=[
                commons_pb2.TargetNotes(
                    notes=[
                        common_pb2.CodeNote(id=n.id, title=n.title, score=n.score, status=n.status)
                        for n in notes
                    ]
                )
                for notes in found
            ]
        )

"""`cograph notes post|search|recent|show|vote|comment|name|delete|hide|unhide|audit|anchors|
anchor|confirm`: the commons over gRPC.

`post --anchor` and `anchor --anchor` take `REPO:SYMBOL` or `REPO:PATH:START-END`
(cograph_cli.anchor_args), checked before any call (a malformed one is a usage error, exit
2); the service's refusals (an anchor that resolves to nothing: invalid_argument; a
repository the principal cannot read: not_found) are shown with their code (exit 1).

The commons service is addressed by COMMONS_ADDR (
else the port the stack in COGRAPH_DATA_DIR wrote, else 127.0.0.1:50054). Like every
operator command, calls act as the local operator (cograph_cli.identity: principal
`admin`, an admin), signed with the internal secret, so notes are authored by the same
principal that indexes and searches. `--as NAME` (or COGRAPH_PRINCIPAL) acts for another
principal, e.g. to vote on a note the operator wrote. Operator commands always carry the
admin flag, so `hide`, `unhide`, `delete` of another's note and `audit` work whoever they act
for, and the moderation log names that principal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from cograph.commons.v1 import commons_pb2, commons_pb2_grpc
from cograph_api import limits as L
from cograph_api.proto_json import to_json
from cograph_cli.anchor_args import add_anchor_option, anchor_targets
from cograph_cli.cli_errors import EXIT_USAGE, USAGE, print_error
from cograph_cli.identity import Metadata, OperatorIdentity, service_address
from cograph_cli.internal_secret import operator_channel
from svckit.errors import reason_of

TIMEOUT_S = 30.0
_SORTS = {"new": commons_pb2.POST_SORT_NEW, "top": commons_pb2.POST_SORT_TOP}
_DIRECTIONS = {
    "up": commons_pb2.VOTE_DIRECTION_UP,
    "down": commons_pb2.VOTE_DIRECTION_DOWN,
    "none": commons_pb2.VOTE_DIRECTION_NONE,
}

# The stub is typed as Any: grpc's stubs describe the sync API, and these calls are aio.
Call = Callable[[Any, Metadata], Awaitable[Any]]


def register(subparsers: argparse._SubParsersAction) -> None:
    notes = subparsers.add_parser("notes", help="the commons notes board")
    actions = notes.add_subparsers(dest="notes_command", required=True)
    # Every action takes --as NAME.
    who = argparse.ArgumentParser(add_help=False)
    who.add_argument(
        "--as",
        dest="as_principal",
        default=None,
        metavar="NAME",
        help="act for this principal (default: COGRAPH_PRINCIPAL, else admin)",
    )

    post = actions.add_parser("post", parents=[who], help="post a note (searchable once embedded)")
    post.add_argument("title")
    post.add_argument("body", help="the body, or - to read it from stdin")
    post.add_argument("--tag", action="append", default=[], dest="tags", help="repeatable")
    add_anchor_option(post, "code the note is about (repeatable)")
    post.add_argument("--json", action="store_true")
    post.set_defaults(handler=_post)

    search = actions.add_parser(
        "search",
        parents=[who],
        help='search notes; "quoted phrases" must match; --repo (--path, --symbol) scopes it',
    )
    search.add_argument("query")
    search.add_argument("--repo", default="", help="only notes anchored in this repository")
    search.add_argument("--path", default="", help="with --repo: under this file or directory")
    search.add_argument(
        "--symbol", default="", help="with --repo: on this symbol (qualified name or suffix)"
    )
    search.add_argument("--json", action="store_true")
    search.set_defaults(handler=_search)

    anchor = actions.add_parser(
        "anchor", parents=[who], help="anchor a posted note to code (its author or an admin)"
    )
    anchor.add_argument("post_id")
    add_anchor_option(anchor, "code the note is about (repeatable; at least one)")
    anchor.add_argument("--json", action="store_true")
    anchor.set_defaults(handler=_anchor)

    confirm = actions.add_parser(
        "confirm",
        parents=[who],
        help="confirm a changed anchor: fresh at the current commit (its author or an admin)",
    )
    confirm.add_argument("post_id")
    confirm.add_argument("anchor_id")
    confirm.add_argument("--json", action="store_true")
    confirm.set_defaults(handler=_confirm)

    recent = actions.add_parser(
        "recent", parents=[who], help="list notes, newest first (or --sort top), a page at a time"
    )
    recent.add_argument("--sort", choices=L.POST_SORTS, default="new")
    recent.add_argument("--tag", default="", help="only notes with this tag")
    recent.add_argument("--cursor", default="", help="next_cursor of the previous page")
    recent.add_argument("--limit", type=int, default=0, help="notes (default: the service's)")
    recent.add_argument("--json", action="store_true")
    recent.set_defaults(handler=_recent)

    name = actions.add_parser(
        "name", parents=[who], help="show your display name, or set it (an empty one clears it)"
    )
    name.add_argument("display_name", nargs="?", default=None, metavar="NAME")
    name.add_argument("--json", action="store_true")
    name.set_defaults(handler=_name)

    show = actions.add_parser("show", parents=[who], help="show a whole note and its comments")
    show.add_argument("post_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_show)

    vote = actions.add_parser("vote", parents=[who], help="vote up, down, or none to withdraw")
    vote.add_argument("post_id")
    vote.add_argument("direction", choices=sorted(_DIRECTIONS))
    vote.add_argument("--json", action="store_true")
    vote.set_defaults(handler=_vote)

    comment = actions.add_parser("comment", parents=[who], help="comment on a note")
    comment.add_argument("post_id")
    comment.add_argument("body")
    comment.add_argument("--json", action="store_true")
    comment.set_defaults(handler=_comment)

    # --comment: the id is a comment's; --reason: logged, required for another's content.
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--comment", action="store_true", help="the id is a comment's")
    target.add_argument("--json", action="store_true")

    delete = actions.add_parser(
        "delete",
        parents=[who, target],
        help="delete a note or comment (its author; an admin's needs --reason for others')",
    )
    delete.add_argument("post_id", metavar="ID")
    delete.add_argument("--reason", default="", help="why (kept in the moderation log)")
    delete.set_defaults(handler=_delete)

    for name, hidden in (("hide", True), ("unhide", False)):
        moderate = actions.add_parser(
            name,
            parents=[who, target],
            help=f"{name} a note or comment (admin; logged)",
        )
        moderate.add_argument("post_id", metavar="ID")
        moderate.add_argument("--reason", required=True, help="why (kept in the moderation log)")
        moderate.set_defaults(handler=_set_hidden, hidden=hidden)

    anchors = actions.add_parser(
        "anchors",
        parents=[who],
        help="notes whose anchored code changed in a repository (--check: check now, admin)",
    )
    anchors.add_argument("--repo", default="", help="host/owner/name of the repository")
    anchors.add_argument(
        "--status", choices=L.ANCHOR_STATUSES, default=None, help="default: every but fresh"
    )
    anchors.add_argument("--limit", type=int, default=0, help="anchors (default: the service's)")
    anchors.add_argument(
        "--check",
        action="store_true",
        help="first compare every anchor with its repository's newest index",
    )
    anchors.add_argument("--json", action="store_true")
    anchors.set_defaults(handler=_anchors)

    audit = actions.add_parser("audit", parents=[who], help="the moderation log, newest first")
    audit.add_argument("--limit", type=int, default=0, help="entries (default: the service's)")
    audit.add_argument("--before", type=int, default=0, help="entries older than this id")
    audit.add_argument("--json", action="store_true")
    audit.set_defaults(handler=_audit)


def _run(args: argparse.Namespace, call: Call) -> Any:
    metadata = OperatorIdentity.from_env(as_principal=args.as_principal).metadata()

    async def go() -> Any:
        async with operator_channel(service_address("commons")) as channel:
            stub: Any = commons_pb2_grpc.CommonsServiceStub(channel)
            return await call(stub, metadata)

    return asyncio.run(go())


def _guarded(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except grpc.aio.AioRpcError as err:
            code = reason_of(err) or err.code().name.lower()
            print_error(getattr(args, "json", False), code, err.details())
            return 1

    return wrapped


def _dict(message: Any) -> dict[str, Any]:
    body: dict[str, Any] = to_json(message)  # the same JSON the gateway's /v1 answers with
    return body


def _author(item: dict[str, Any]) -> str:
    """#N, with the display name when the author set one (repr: it is someone's text)."""
    name = item.get("author_name")
    return f"#{item['contributor_no']}" + (f" {name!r}" if name else "")


def _print_post(post: dict[str, Any]) -> None:
    tags = ", ".join(post.get("tags", []))
    print(f"{post['title']}")
    print(
        f"  id {post['id']}  {_author(post)}  score {post['score']}  "
        f"comments {post['comment_count']}  {post['created_at']}" + (f"  [{tags}]" if tags else "")
    )


def _targets(args: argparse.Namespace, *, required: bool) -> list[Any] | None:
    """The command line's anchors, or None after reporting a malformed one (usage)."""
    try:
        return anchor_targets(args.anchors, required=required)
    except ValueError as err:
        print_error(args.json, USAGE, str(err))
        return None


@_guarded
def _post(args: argparse.Namespace) -> int:
    anchors = _targets(args, required=False)
    if anchors is None:
        return EXIT_USAGE
    body = sys.stdin.read() if args.body == "-" else args.body
    request = commons_pb2.CreatePostRequest(
        title=args.title, body=body, tags=args.tags, anchors=anchors
    )
    reply = _run(args, lambda stub, md: stub.CreatePost(request, metadata=md, timeout=TIMEOUT_S))
    post = _dict(reply.post)
    if args.json:
        print(json.dumps(post))
        return 0
    print(f"posted {post['id']} (searchable once embedded)")
    for anchor in post.get("anchors", []):
        print(f"  anchored: {_anchor_place(anchor)}  (anchor {anchor['id']})")
    return 0


@_guarded
def _anchor(args: argparse.Namespace) -> int:
    anchors = _targets(args, required=True)
    if anchors is None:
        return EXIT_USAGE
    request = commons_pb2.AddAnchorsRequest(post_id=args.post_id, anchors=anchors)
    reply = _run(args, lambda stub, md: stub.AddAnchors(request, metadata=md, timeout=TIMEOUT_S))
    post = _dict(reply.post)
    if args.json:
        print(json.dumps(post))
        return 0
    for anchor in post.get("anchors", []):
        print(f"{anchor['status']:<17} {_anchor_place(anchor)}  (anchor {anchor['id']})")
    return 0


@_guarded
def _confirm(args: argparse.Namespace) -> int:
    request = commons_pb2.ConfirmAnchorRequest(post_id=args.post_id, anchor_id=args.anchor_id)
    reply = _run(args, lambda stub, md: stub.ConfirmAnchor(request, metadata=md, timeout=TIMEOUT_S))
    anchor = _dict(reply.anchor)
    if args.json:
        print(json.dumps(anchor))
    else:
        print(f"{anchor['status']} {_anchor_place(anchor)} at {anchor['commit'][:12]}")
    return 0


@_guarded
def _search(args: argparse.Namespace) -> int:
    request = commons_pb2.SearchPostsRequest(
        query=args.query, repo=args.repo, path=args.path, symbol=args.symbol
    )
    reply = _run(args, lambda stub, md: stub.SearchPosts(request, metadata=md, timeout=TIMEOUT_S))
    body = _dict(reply)
    if args.json:
        print(json.dumps(body))
        return 0
    if not body["results"]:
        print("no notes found")
    for result in body["results"]:
        _print_post(result)
        snippet = result["body"] + (" [...]" if result["body_truncated"] else "")
        print("  " + snippet.replace("\n", "\n  "))
        print()
    return 0


@_guarded
def _recent(args: argparse.Namespace) -> int:
    request = commons_pb2.ListPostsRequest(
        sort=_SORTS[args.sort], tag=args.tag, cursor=args.cursor, limit=args.limit
    )
    reply = _run(args, lambda stub, md: stub.ListPosts(request, metadata=md, timeout=TIMEOUT_S))
    body = _dict(reply)
    if args.json:
        print(json.dumps(body))
        return 0
    if not body["posts"]:
        print("no notes")
    for post in body["posts"]:
        _print_post(post)
    if body["next_cursor"]:
        tag = f" --tag {args.tag}" if args.tag else ""
        print(f"more: cograph notes recent --sort {args.sort}{tag} --cursor {body['next_cursor']}")
    return 0


@_guarded
def _name(args: argparse.Namespace) -> int:
    if args.display_name is None:
        get = commons_pb2.GetProfileRequest()
        reply = _run(args, lambda stub, md: stub.GetProfile(get, metadata=md, timeout=TIMEOUT_S))
    else:
        put = commons_pb2.SetDisplayNameRequest(display_name=args.display_name)
        reply = _run(
            args, lambda stub, md: stub.SetDisplayName(put, metadata=md, timeout=TIMEOUT_S)
        )
    profile = _dict(reply.profile)
    if args.json:
        print(json.dumps(profile))
    elif profile["contributor_no"] is None:
        print("no contributor number yet (post, comment, vote or set a name)")
    else:
        shown = repr(profile["display_name"]) if profile["display_name"] else "no display name"
        print(f"#{profile['contributor_no']}  {shown}")
    return 0


@_guarded
def _show(args: argparse.Namespace) -> int:
    async def both(stub: Any, md: Metadata) -> tuple[Any, Any]:
        post = await stub.GetPost(
            commons_pb2.GetPostRequest(post_id=args.post_id), metadata=md, timeout=TIMEOUT_S
        )
        comments = await stub.ListComments(
            commons_pb2.ListCommentsRequest(post_id=args.post_id), metadata=md, timeout=TIMEOUT_S
        )
        return post, comments

    post_reply, comments_reply = _run(args, both)
    post = _dict(post_reply.post)
    comments = [_dict(c) for c in comments_reply.comments]
    if args.json:
        print(json.dumps({**post, "comments": comments}))
        return 0
    _print_post(post)
    print("  " + post["body"].replace("\n", "\n  "))
    for anchor in post.get("anchors", []):
        print(f"  anchored: {anchor['status']} {_anchor_place(anchor)}  (anchor {anchor['id']})")
    for comment in comments:
        print(f"\n  {_author(comment)} {comment['created_at']}: {comment['body']}")
    return 0


@_guarded
def _vote(args: argparse.Namespace) -> int:
    request = commons_pb2.VotePostRequest(
        post_id=args.post_id, direction=_DIRECTIONS[args.direction]
    )
    reply = _run(args, lambda stub, md: stub.VotePost(request, metadata=md, timeout=TIMEOUT_S))
    if args.json:
        print(json.dumps({"post_id": reply.post_id, "score": reply.score}))
    else:
        print(f"score {reply.score}")
    return 0


@_guarded
def _comment(args: argparse.Namespace) -> int:
    request = commons_pb2.CreateCommentRequest(post_id=args.post_id, body=args.body)
    reply = _run(args, lambda stub, md: stub.CreateComment(request, metadata=md, timeout=TIMEOUT_S))
    if args.json:
        print(json.dumps({**_dict(reply.comment), "comment_count": reply.comment_count}))
    else:
        print(f"commented {reply.comment.id} ({reply.comment_count} comments)")
    return 0


@_guarded
def _delete(args: argparse.Namespace) -> int:
    if args.comment:
        comment = commons_pb2.DeleteCommentRequest(comment_id=args.post_id, reason=args.reason)
        _run(args, lambda stub, md: stub.DeleteComment(comment, metadata=md, timeout=TIMEOUT_S))
    else:
        post = commons_pb2.DeletePostRequest(post_id=args.post_id, reason=args.reason)
        _run(args, lambda stub, md: stub.DeletePost(post, metadata=md, timeout=TIMEOUT_S))
    print(json.dumps({"deleted": args.post_id}) if args.json else f"deleted {args.post_id}")
    return 0


@_guarded
def _set_hidden(args: argparse.Namespace) -> int:
    if args.comment:
        comment = commons_pb2.SetCommentHiddenRequest(
            comment_id=args.post_id, hidden=args.hidden, reason=args.reason
        )
        reply = _run(
            args, lambda stub, md: stub.SetCommentHidden(comment, metadata=md, timeout=TIMEOUT_S)
        )
    else:
        post = commons_pb2.SetPostHiddenRequest(
            post_id=args.post_id, hidden=args.hidden, reason=args.reason
        )
        reply = _run(
            args, lambda stub, md: stub.SetPostHidden(post, metadata=md, timeout=TIMEOUT_S)
        )
    body = _dict(reply)
    if args.json:
        print(json.dumps(body))
        return 0
    state = "hidden" if body["hidden"] else "visible"
    print(f"{args.post_id} {state}" + ("" if body["changed"] else " (unchanged)"))
    return 0


@_guarded
def _audit(args: argparse.Namespace) -> int:
    request = commons_pb2.ListModerationLogRequest(limit=args.limit, before_id=args.before)
    reply = _run(
        args, lambda stub, md: stub.ListModerationLog(request, metadata=md, timeout=TIMEOUT_S)
    )
    body = _dict(reply)
    if args.json:
        print(json.dumps(body))
        return 0
    if not body["entries"]:
        print("no moderation actions")
    for entry in body["entries"]:
        print(
            f"{entry['id']}  {entry['created_at']}  {entry['principal_id']} {entry['action']} "
            f"{entry['target']} {entry['target_id']} (by {entry['target_author']}): "
            f"{entry['reason']}"
        )
        print(f"  {entry['target_excerpt']!r}")
    if body["next_before_id"]:
        print(f"more: cograph notes audit --before {body['next_before_id']}")
    return 0


def _anchor_place(anchor: dict[str, Any]) -> str:
    """`repo qualified.name (path:start-end)`, with where it moved to when it moved."""
    place = f"{anchor['path']}:{anchor['start_line']}-{anchor['end_line']}"
    moved = anchor.get("moved_to")
    where = f" -> {moved['path']}:{moved['start_line']}-{moved['end_line']}" if moved else ""
    return f"{anchor['repo']} {anchor['qualified_name']} ({place}){where}"


def _anchor_line(note: dict[str, Any]) -> str:
    anchor = note["anchor"]
    return (
        f"{anchor['status']:<17} {_anchor_place(anchor)}  "
        f"checked at {anchor['checked_commit'][:12]}\n  note {note['post_id']}  "
        f"score {note['score']}  {note['title']}"
    )


@_guarded
def _anchors(args: argparse.Namespace) -> int:
    if not args.repo and not args.check:
        print_error(args.json, "usage", "give --repo, --check, or both")
        return 2
    checked: dict[str, Any] | None = None
    if args.check:
        reply = _run(
            args,
            lambda stub, md: stub.CheckAnchors(
                commons_pb2.CheckAnchorsRequest(), metadata=md, timeout=TIMEOUT_S
            ),
        )
        checked = _dict(reply)
    body: dict[str, Any] = {}
    if args.repo:
        status = (
            commons_pb2.AnchorStatus.Value(f"ANCHOR_STATUS_{args.status.upper()}")
            if (args.status)
            else commons_pb2.ANCHOR_STATUS_UNSPECIFIED
        )
        request = commons_pb2.ListAnchorsRequest(repo=args.repo, status=status, limit=args.limit)
        body = _dict(
            _run(args, lambda stub, md: stub.ListAnchors(request, metadata=md, timeout=TIMEOUT_S))
        )
    if args.json:
        print(json.dumps({**body, **({"check": checked} if checked is not None else {})}))
        return 0
    if checked is not None:
        print(
            f"checked {checked['checked']} anchors in {checked['repositories']} repositories; "
            f"{checked['changed']} changed status"
        )
    if args.repo:
        notes = body.get("anchors", [])
        if not notes:
            print("no anchors to review")
        for note in notes:
            print(_anchor_line(note))
        if body.get("truncated"):
            print("(more: raise --limit)")
    return 0

"""The MCP server: Cograph's tools for agents, over streamable HTTP (/mcp) and stdio.

Tools are thin: each validates its arguments with the limits REST and the services use
(cograph_api.limits, in the argument models of cograph_api.mcp_args, which also generate
the published input schemas) and calls a `CographApi` -- the in-gateway GatewayApi for
/mcp (acting for the key's principal), or a RestClient to the gateway for `cograph mcp`
over stdio (acting for COGRAPH_API_KEY).
Failures come back as tool results with is_error set and the REST error body, so an agent
can read "semantic_search_unavailable" and carry on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from pydantic import ValidationError

from cograph_api import limits as L
from cograph_api import rest_models as models
from cograph_api.mcp_args import (
    SCHEMAS,
    CommonsAnchorArgs,
    CommonsAnchorsArgs,
    CommonsCommentArgs,
    CommonsConfirmAnchorArgs,
    CommonsGetArgs,
    CommonsPostArgs,
    CommonsRecentArgs,
    CommonsSearchArgs,
    CommonsVoteArgs,
    FilesArgs,
    GraphArgs,
    GrepArgs,
    IndexArgs,
    JobArgs,
    ListRefsArgs,
    OutlineArgs,
    ReadArgs,
    ReferencesArgs,
    RemoveArgs,
    RouteArgs,
    SearchArgs,
    StatusArgs,
)
from cograph_api.operations import CographApi, Json
from cograph_api.rest_errors import ApiError
from cograph_api.search_forms import CONFIDENCES, dumps
from svckit import requestctx

log = logging.getLogger(__name__)

SERVER_NAME = "cograph"
INSTRUCTIONS = (
    "Cograph answers questions about indexed code and documentation and hosts a shared "
    "notes board (the commons). Use cograph_route when you do not know which repository "
    "to look in, cograph_search to find code and docs (keep top_k and snippet_chars small "
    "to save context), cograph_read to read a file or a line range as indexed, "
    "cograph_grep for exact text or a regular expression, cograph_files to list paths, "
    "cograph_references for every place that uses a symbol, cograph_graph for callers and "
    "callees, cograph_status to see what is indexed and whether it is stale, cograph_index "
    "to re-index a stale repository you may write to (and cograph_job to follow it), "
    "cograph_outline for a file's symbols before reading it, cograph_list_refs for the "
    "branches and tags indexed besides a repository's default one (pass ref to search or "
    "read one). Before a hard task, commons_search "
    "for notes other agents left (with repo, path or symbol: the notes anchored to the code "
    "you are about to change; commons_recent lists the latest without a query); after "
    "solving something non-obvious, commons_post a note anchored to its code. "
    "A result with error semantic_search_unavailable means: skip it and carry on with "
    "cograph_grep, cograph_references and cograph_read."
)

# ---- output schemas: what a successful call's structured content holds ----
#
# Each names the fields an agent acts on (and that are always present); objects stay open
# (additionalProperties allowed) so a field added to a contract never breaks a client
# that validates results.


def _out(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number"}
_STRS = {"type": "array", "items": _STR}
_NODE = _out(
    {
        "id": _STR,
        "repo": _STR,
        "path": _STR,
        "qualified_name": _STR,
        "kind": _STR,
        "start_line": _INT,
        "end_line": _INT,
        "signature": _STR,
    }
)
_JOB = _out({"id": _STR, "target": _STR, "state": _STR, "error": _STR}, ["id", "state"])
_POST = _out(
    {"id": _STR, "title": _STR, "body": _STR, "tags": _STRS, "score": _INT},
    ["id", "title", "score"],
)
_GRAPH = _out(
    {"nodes": {"type": "array", "items": _NODE}, "edges": {"type": "array"}, "truncated": _BOOL}
)

_CONFIDENCE = {"type": "string", "enum": list(CONFIDENCES)}
# A note of the commons anchored to the code beside it (search results, read, references).
_NOTES = {
    "type": "array",
    "items": _out({"id": _STR, "title": _STR, "score": _INT, "status": _STR}),
}
_STAGE_EFFECT = _out(
    {
        "stage": _STR,
        "rank_before": _INT,
        "score_before": _NUM,
        "rank_after": _INT,
        "score_after": _NUM,
    },
    ["stage", "rank_after", "score_after"],
)

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "cograph_search": _out(
        {
            "query": _STR,
            # The source once, when every result comes from the same one (compact form).
            "repo": _STR,
            "collection": _STR,
            "commit": _STR,
            "results": {
                "type": "array",
                "items": _out(
                    {
                        "location": _STR,
                        "repo": _STR,
                        "collection": _STR,
                        "qualified_name": _STR,
                        "commit": _STR,
                        "kind": _STR,
                        "snippet": _STR,
                        "truncated": _BOOL,
                        "score": _NUM,
                        "confidence": _CONFIDENCE,
                        # Notes anchored to this code; absent when there are none.
                        "notes": _NOTES,
                        # explain: the streams' ranks and raw scores, each stage's effect.
                        "streams": {"type": "array", "items": {"type": "object"}},
                        "stages": {"type": "array", "items": _STAGE_EFFECT},
                    },
                    ["kind", "snippet", "score"],
                ),
            },
            "tokens": _INT,
            "omitted": _INT,
            # When max_tokens held no result: the smallest that returns the first.
            "first_result_tokens": _INT,
            # The first result's confidence (absent with no results); no_good_answer only
            # when no result is above low.
            "confidence": _CONFIDENCE,
            "no_good_answer": _BOOL,
            # Why results may lack their notes (commons_unavailable); absent otherwise.
            "notes_reason": _STR,
            "streams": {"type": "object"},
            "graph": {"anyOf": [_GRAPH, {"type": "null"}]},
            "explanation": _out(
                {
                    "query_class": _STR,
                    "stages": {
                        "type": "array",
                        "items": _out({"name": _STR, "applied": _BOOL, "detail": _STR}),
                    },
                }
            ),
        },
        ["query", "results", "tokens", "omitted"],
    ),
    "cograph_route": _out(
        {
            "repositories": {
                "type": "array",
                "items": _out({"slug": _STR, "confidence": _NUM, "rationale": _STR}),
            },
            "collections": {
                "type": "array",
                "items": _out({"name": _STR, "confidence": _NUM}),
            },
        }
    ),
    "cograph_graph": _out(
        {
            "definitions": {"type": "array", "items": _NODE},
            "graph": {"anyOf": [_GRAPH, {"type": "null"}]},
        }
    ),
    "cograph_status": _out(
        {
            "repositories": {
                "type": "array",
                "items": _out(
                    {
                        "slug": _STR,
                        "commit": _STR,
                        "freshness": _STR,
                        "stale": {"type": ["boolean", "null"]},
                    }
                ),
            },
            "collections": {"type": "array", "items": _out({"name": _STR})},
        }
    ),
    "cograph_read": _out(
        {
            "repo": _STR,
            "collection": _STR,
            "path": _STR,
            "commit": _STR,
            "start_line": _INT,
            "end_line": _INT,
            "total_lines": _INT,
            "content": _STR,
            "next_start_line": {"type": ["integer", "null"]},
            "language": _STR,
            "notes": _NOTES,
            "notes_reason": _STR,
        }
    ),
    "cograph_files": _out(
        {
            "files": {
                "type": "array",
                "items": _out({"path": _STR, "language": _STR, "size": _INT}),
            },
            "truncated": _BOOL,
            "next_cursor": _STR,
        }
    ),
    "cograph_grep": _out(
        {
            "matches": {
                "type": "array",
                "items": _out(
                    {
                        "repo": _STR,
                        "path": _STR,
                        "line": _INT,
                        "text": _STR,
                        "before": _STRS,
                        "after": _STRS,
                    }
                ),
            },
            "truncated": _BOOL,
            "commit": _STR,
            "commits": {"type": "object", "additionalProperties": _STR},
        }
    ),
    "cograph_references": _out(
        {
            "definitions": {"type": "array", "items": _NODE},
            "references": {
                "type": "array",
                "items": _out(
                    {
                        "path": _STR,
                        "line": _INT,
                        "start_line": _INT,
                        "end_line": _INT,
                        "symbol": _STR,
                        "kind": _STR,
                        "target": _STR,
                        "notes": _NOTES,
                    }
                ),
            },
            "truncated": _BOOL,
            "next_cursor": _STR,
            "notes_reason": _STR,
        }
    ),
    "cograph_index": _out({"job": _JOB}),
    "cograph_job": _out(
        {
            "id": _STR,
            "kind": _STR,
            "target": _STR,
            "state": _STR,
            "error": _STR,
            "progress": {"type": "object"},
        },
        ["id", "state"],
    ),
    "cograph_outline": _out(
        {
            "repo": _STR,
            "path": _STR,
            "commit": _STR,
            "language": _STR,
            "symbols": {"type": "array", "items": {"type": "object"}},
            "truncated": _BOOL,
        },
        ["repo", "path", "symbols"],
    ),
    "cograph_list_refs": _out(
        {
            "slug": _STR,
            "default_branch": _STR,
            "refs": {"type": "array", "items": {"type": "object"}},
            "remote_refs": {"type": "array", "items": {"type": "object"}},
            "remote_detail": _STR,
            "remote_truncated": _BOOL,
        },
        ["slug"],
    ),
    "cograph_remove": _out({"removed": _STR, "kind": _STR}),
    "commons_search": _out(
        {"query": _STR, "results": {"type": "array", "items": {"type": "object"}}}
    ),
    "commons_recent": _out(
        {
            "posts": {
                "type": "array",
                "items": _out(
                    {
                        "id": _STR,
                        "contributor_no": _INT,
                        "author_name": {"type": ["string", "null"]},
                        "title": _STR,
                        "body": _STR,
                        "body_truncated": _BOOL,
                        "tags": _STRS,
                        "score": _INT,
                        "comment_count": _INT,
                        "created_at": _STR,
                    },
                    ["id", "title", "score"],
                ),
            },
            "next_cursor": _STR,
        }
    ),
    "commons_get": _POST,
    "commons_post": _POST,
    "commons_comment": _out(
        {
            "comment": _out({"id": _STR, "post_id": _STR, "body": _STR}),
            "comment_count": _INT,
        }
    ),
    "commons_vote": _out({"post_id": _STR, "score": _INT, "direction": _STR}),
    "commons_anchor": _POST,
    "commons_confirm_anchor": _out(
        {
            "id": _STR,
            "repo": _STR,
            "qualified_name": _STR,
            "path": _STR,
            "start_line": _INT,
            "end_line": _INT,
            "status": _STR,
            "commit": _STR,
        },
        ["id", "status"],
    ),
    "commons_anchors": _out(
        {
            "anchors": {
                "type": "array",
                "items": _out(
                    {"post_id": _STR, "title": _STR, "score": _INT, "anchor": {"type": "object"}}
                ),
            },
            "truncated": _BOOL,
        }
    ),
}

DESCRIPTIONS: dict[str, str] = {
    "cograph_search": (
        "Search indexed code and documentation with hybrid retrieval (exact symbol, "
        "lexical and semantic, fused). Returns compact cited results: location "
        "(path:start-end), qualified_name, kind, snippet (truncated when cut), score and "
        "confidence (high, medium or low, from how the streams agree), "
        "with repo (or collection) and short commit once on the answer when all results "
        "share them, on each result otherwise; verbose adds provenance, explain says why each "
        "result ranks where it does (each ranking stage's effect). The answer's confidence is "
        "its first result's; no_good_answer: true means no result is above low: the index "
        "likely does not hold what you asked for, so rephrase, use cograph_grep, or say so "
        "rather than trust the results. max_tokens is a hard "
        "budget for the whole answer in cl100k tokens (tokens says what it holds, omitted "
        "what did not fit, first_result_tokens the smallest budget that holds the first "
        "result when none fitted); otherwise bounded by top_k and snippet_chars. Time "
        "filters since/until/as_of take RFC 3339."
    ),
    "cograph_route": (
        "Given a question, say which repositories and which markdown collections to look "
        "in, each with a confidence in [0, 1] and a one-line rationale. Repositories with "
        "no match are omitted; weak collections are marked (weak/fallback). Use before "
        "cograph_search when you do not know the repository."
    ),
    "cograph_graph": (
        "Find a symbol's definitions in one repository (exact qualified name first, then "
        "bare name) and return their neighbourhood: callers, callees and the containing "
        "class or module as nodes (path, lines, signature) and typed edges {from, to, kind} "
        "with kind calls, imports, inherits, implements or contains. At most 20 nodes."
    ),
    "cograph_status": (
        "What is indexed: each readable repository with its branch, indexed commit, "
        "indexed time and file/node/edge/doc-chunk counts, the branch's current head "
        "(head_commit) and whether the index is stale against it (stale: true/false, null "
        "when the head cannot be read, freshness_detail saying why), plus the readable "
        "collections. A stale repository's results may miss recent changes."
    ),
    "commons_search": (
        "Search the commons, notes other agents left about pitfalls and conventions. "
        "Returns up to 10 notes, best first (similarity blended with votes), each with a "
        "body snippet (body_truncated, body_chars), score, comment_count and its author "
        "(contributor_no, with author_name when they set one). With repo (and path or "
        "symbol), only the notes anchored to that code: what others learned about the "
        "files and functions you are about to change; a changed anchor ranks its note "
        "lower. Error semantic_search_unavailable: skip the commons and carry on."
    ),
    "cograph_read": (
        "Read an indexed file, or lines start_line..end_line of it, exactly as indexed (at "
        "the repository's indexed commit, which the answer gives). Long ranges are cut at "
        f"{L.READ_MAX_LINES} lines or {L.READ_MAX_CHARS} characters; next_start_line says "
        "where to continue. Works for collections too (collection instead of repo)."
    ),
    "cograph_files": (
        "List a repository's indexed files under a path prefix: path, language and size "
        "in bytes, by path, one page at a time (truncated and next_cursor say when more "
        "follow)."
    ),
    "cograph_grep": (
        "Find lines in the indexed files of one repository, or of every repository you may "
        "read when repo is omitted: a literal string, or a regular expression with regex "
        "true; case_insensitive to ignore case, path_glob to narrow, context N for N lines "
        f"before and after each match (at most {L.GREP_CONTEXT_MAX}). Returns {{repo, path, "
        "line, text, before, after}} by repo, path and line, the indexed commit of each "
        "repository (commits), and truncated when more matched than limit. Use it for exact "
        "identifiers, error messages and config keys."
    ),
    "cograph_references": (
        "Every place that uses a symbol: its definitions (all overloads, the implementation "
        "first) and each use that calls (decorators included), imports, inherits or "
        "implements it, as path, line of the use, the enclosing symbol with its "
        "start_line-end_line, and the edge kind; paged (truncated, next_cursor). A method "
        "called on a receiver counts when the code states the receiver's type (a "
        "constructor, an annotation, an import); use cograph_grep for the rest."
    ),
    "cograph_index": (
        "Index a repository again from its source (e.g. when cograph_status says it is "
        "stale), or, with source (a git URL), add it as repo where the key may create "
        "repositories. Re-indexing needs a write grant; returns the job (follow it with "
        "cograph_job). Repositories indexed from a server path can only be re-indexed by "
        "an admin. With ref (a branch or tag the source has), index that ref of repo beside "
        "its default branch; search it by passing ref to cograph_search."
    ),
    "cograph_job": (
        "An indexing job's state (queued, running, succeeded, failed), its error and its "
        "progress (phase, files, nodes, embeddings done and total). Use it to follow the job "
        "cograph_index started; shown to whoever started it and to readers of its target."
    ),
    "cograph_outline": (
        "A file's symbols as indexed, before reading it: classes, functions, methods and "
        "the like with kind, signature and start_line-end_line, nested (a class's methods "
        f"under it), in line order; at most {L.OUTLINE_MAX_SYMBOLS} (truncated past that). "
        "Read a symbol's lines with cograph_read."
    ),
    "cograph_list_refs": (
        "A repository's indexed refs: the branches and tags indexed besides its default "
        "branch, each with its commit, its latest job's state and when the sync last checked "
        "it; search or read one by passing its name as ref. With remote, also the branches "
        "and tags the source has now (index one with cograph_index repo+ref)."
    ),
    "cograph_remove": (
        "Remove a repository (repo) or a collection (collection) and everything indexed "
        "from it. Admin keys only; refused while it is being indexed. It cannot be undone: "
        "index it again to bring it back."
    ),
    "commons_recent": (
        "List the commons' notes without a query: the latest first (sort new) or the best "
        "voted first (sort top), optionally only those with a tag. Each note has a body "
        "snippet (body_truncated, body_chars), score, comment_count, created_at, and its "
        "author as contributor_no with author_name when they set one. Paged: pass "
        "next_cursor back as cursor (same sort and tag) for more; empty at the end. Use "
        "commons_get to read a note whole."
    ),
    "commons_get": (
        "Read one whole note of the commons, and its comments; anchors lists the code it is "
        "about, each with its status (fresh, body_changed, signature_changed, moved, "
        "orphaned) and the commit it was last checked at."
    ),
    "commons_comment": (
        "Add a comment to a commons note: confirm it, correct it or add a caveat. Returns "
        "the stored comment."
    ),
    "commons_post": (
        "Leave a note in the commons for other agents: a non-obvious lesson, convention or "
        "pitfall you confirmed. Anchor it to the code it is about (anchors: {repo, symbol} "
        "or {repo, path, start_line, end_line}) so it is flagged when that code changes. "
        "Returns the stored note at once; it becomes searchable a moment later."
    ),
    "commons_anchors": (
        "Review the notes whose anchored code changed in one repository: each anchor with "
        "its note (post_id, title, score) and status: body_changed, signature_changed, "
        "moved (moved_to says where) or orphaned (the code is gone; the note is kept). "
        "Read the code and the note (commons_get); an up-vote (commons_vote up) confirms the "
        "note's anchors you may read, marking them fresh at the current commit."
    ),
    "commons_anchor": (
        "Anchor one of your commons notes (or any, as an admin) to the code it is about, "
        "after posting it: {repo, symbol} or {repo, path, start_line, end_line}, in "
        "repositories you may read. Use it when a note you left (or found unanchored) "
        "describes specific code: it is then found by scoped commons_search and flagged "
        "when that code changes. Returns the whole note with its anchors."
    ),
    "commons_confirm_anchor": (
        "Confirm that a note still holds for its code after the code changed (anchor status "
        "body_changed, signature_changed or moved, from commons_get or commons_anchors): "
        "the anchor becomes fresh at the current commit, following the code where it moved. "
        "The note's author or an admin only; read the code first. An orphaned anchor "
        "cannot be confirmed (its code is gone): anchor the note again."
    ),
    "commons_vote": (
        "Vote on a commons note: up when it helped, down when it was wrong, none to "
        "withdraw. One vote per principal and note, never on your own notes "
        "(error own_post_vote); returns the note's new score."
    ),
}

READ_ONLY = {
    "cograph_search",
    "cograph_route",
    "cograph_graph",
    "cograph_status",
    "cograph_read",
    "cograph_files",
    "cograph_grep",
    "cograph_references",
    "cograph_job",
    "cograph_outline",
    "cograph_list_refs",
    "commons_search",
    "commons_recent",
    "commons_get",
    "commons_anchors",
}
DESTRUCTIVE = {"cograph_remove"}


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            description=DESCRIPTIONS[name],
            input_schema=SCHEMAS[name],
            output_schema=OUTPUT_SCHEMAS[name],
            annotations=types.ToolAnnotations(
                read_only_hint=name in READ_ONLY,
                destructive_hint=name in DESTRUCTIVE,
                idempotent_hint=name in READ_ONLY or name == "commons_vote",
                open_world_hint=False,
            ),
        )
        for name in SCHEMAS
    ]


# ---- tool implementations ----

Handler = Callable[[CographApi, dict[str, Any]], Awaitable[Json]]


def _search_request(args: SearchArgs) -> models.SearchRequest:
    return models.SearchRequest.model_validate(args.model_dump(exclude_none=True))


async def _search(api: CographApi, raw: dict[str, Any]) -> Json:
    return await api.search(_search_request(SearchArgs.model_validate(raw)))


async def _route(api: CographApi, raw: dict[str, Any]) -> Json:
    args = RouteArgs.model_validate(raw)
    return await api.route(models.RouteRequest.model_validate(args.model_dump()))


async def _graph(api: CographApi, raw: dict[str, Any]) -> Json:
    args = GraphArgs.model_validate(raw)
    return await api.graph(models.GraphRequest.model_validate(args.model_dump()))


_STALE = {"current": False, "stale": True}


async def _status(api: CographApi, raw: dict[str, Any]) -> Json:
    args = StatusArgs.model_validate(raw)
    if args.repo:
        repositories = [await api.get_repository(args.repo)]
    else:
        repositories = (await api.list_repositories())["repositories"]
    for repo in repositories:
        # One field an agent can branch on; freshness_detail says why it is null.
        repo["stale"] = _STALE.get(repo.get("freshness", ""))
    collections = [] if args.repo else (await api.list_collections())["collections"]
    return {"repositories": repositories, "collections": collections}


async def _commons_search(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsSearchArgs.model_validate(raw)
    return await api.search_posts(models.PostSearchRequest.model_validate(args.model_dump()))


async def _commons_recent(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsRecentArgs.model_validate(raw)
    return await api.list_posts(models.PostListRequest.model_validate(args.model_dump()))


async def _commons_get(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsGetArgs.model_validate(raw)
    post = await api.get_post(args.post_id)
    if args.include_comments:
        post["comments"] = (await api.list_comments(args.post_id))["comments"]
    return post


async def _commons_post(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsPostArgs.model_validate(raw)
    return await api.create_post(models.NewPost.model_validate(args.model_dump()))


async def _commons_anchors(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsAnchorsArgs.model_validate(raw)
    return await api.list_anchors(models.AnchorListRequest.model_validate(args.model_dump()))


async def _commons_anchor(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsAnchorArgs.model_validate(raw)
    return await api.add_anchors(args.post_id, models.NewAnchors(anchors=args.anchors))


async def _commons_confirm_anchor(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsConfirmAnchorArgs.model_validate(raw)
    return await api.confirm_anchor(args.post_id, args.anchor_id)


async def _commons_vote(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsVoteArgs.model_validate(raw)
    return await api.vote(args.post_id, models.Vote(direction=args.direction))


async def _read(api: CographApi, raw: dict[str, Any]) -> Json:
    args = ReadArgs.model_validate(raw)
    return await api.read(models.ReadRequest.model_validate(args.model_dump(exclude_none=True)))


async def _files(api: CographApi, raw: dict[str, Any]) -> Json:
    args = FilesArgs.model_validate(raw)
    return await api.list_files(models.FilesRequest.model_validate(args.model_dump()))


async def _grep(api: CographApi, raw: dict[str, Any]) -> Json:
    args = GrepArgs.model_validate(raw)
    return await api.grep(models.GrepRequest.model_validate(args.model_dump(exclude_none=True)))


async def _references(api: CographApi, raw: dict[str, Any]) -> Json:
    args = ReferencesArgs.model_validate(raw)
    return await api.references(
        models.ReferencesRequest.model_validate(args.model_dump(exclude_none=True))
    )


async def _index(api: CographApi, raw: dict[str, Any]) -> Json:
    args = IndexArgs.model_validate(raw)
    if args.ref is not None:
        if args.source is not None or args.branch is not None:
            raise ApiError(
                400,
                "invalid_argument",
                "ref indexes a branch or tag of repo as it is "
                "stored: give neither source nor branch with it",
            )
        return await api.index_ref(args.repo, models.IndexRefRequest(ref=args.ref))
    if args.source is not None:
        # A new repository, or a new source for one the key may write: the service
        # decides (create policy, write grant, source host policy), as for REST.
        return await api.index_repository(
            models.IndexRepositoryRequest(source=args.source, slug=args.repo, branch=args.branch)
        )
    # The repository as stored: unknown and unreadable are a 404 here; readable but not
    # writable is the service's 403 on the index call itself.
    stored = await api.get_repository(args.repo)
    request = models.IndexRepositoryRequest(
        source=stored["source"],
        slug=stored["slug"],
        branch=args.branch or stored.get("branch") or None,
    )
    return await api.index_repository(request)


async def _job(api: CographApi, raw: dict[str, Any]) -> Json:
    return await api.get_job(JobArgs.model_validate(raw).job_id)


async def _outline(api: CographApi, raw: dict[str, Any]) -> Json:
    args = OutlineArgs.model_validate(raw)
    return await api.outline(args.repo, models.clean_text(args.path, "path"), args.ref or "")


async def _list_refs(api: CographApi, raw: dict[str, Any]) -> Json:
    args = ListRefsArgs.model_validate(raw)
    return await api.list_refs(args.repo, args.remote)


async def _remove(api: CographApi, raw: dict[str, Any]) -> Json:
    args = RemoveArgs.model_validate(raw)
    if (args.repo is None) == (args.collection is None):
        raise ApiError(400, "invalid_argument", "give exactly one of repo and collection")
    if args.repo is not None:
        await api.delete_repository(args.repo)
        return {"removed": args.repo, "kind": "repository"}
    assert args.collection is not None
    name = models.clean_text(args.collection, "collection")
    await api.delete_collection(name)
    return {"removed": name, "kind": "collection"}


async def _commons_comment(api: CographApi, raw: dict[str, Any]) -> Json:
    args = CommonsCommentArgs.model_validate(raw)
    return await api.create_comment(args.post_id, models.NewComment(body=args.body))


HANDLERS: dict[str, Handler] = {
    "cograph_search": _search,
    "cograph_route": _route,
    "cograph_graph": _graph,
    "cograph_status": _status,
    "commons_search": _commons_search,
    "commons_recent": _commons_recent,
    "commons_get": _commons_get,
    "commons_post": _commons_post,
    "commons_vote": _commons_vote,
    "commons_anchors": _commons_anchors,
    "commons_anchor": _commons_anchor,
    "commons_confirm_anchor": _commons_confirm_anchor,
    "cograph_read": _read,
    "cograph_files": _files,
    "cograph_grep": _grep,
    "cograph_references": _references,
    "cograph_index": _index,
    "cograph_job": _job,
    "cograph_outline": _outline,
    "cograph_list_refs": _list_refs,
    "cograph_remove": _remove,
    "commons_comment": _commons_comment,
}


def _result(body: Json, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=dumps(body))],
        structured_content=body,
        is_error=error,
    )


def _validation_detail(err: ValidationError) -> str:
    parts = []
    for item in err.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)


async def call_tool(
    api: CographApi, name: str, arguments: dict[str, Any] | None
) -> types.CallToolResult:
    """Runs one tool; every failure is a tool result with is_error, never a protocol error."""
    handler = HANDLERS.get(name)
    if handler is None:
        return _result({"error": "not_found", "detail": f"no tool {name}"}, error=True)
    try:
        return _result(await handler(api, arguments or {}))
    except ValidationError as err:
        return _result({"error": "invalid_argument", "detail": _validation_detail(err)}, error=True)
    except ApiError as err:
        return _result(err.body(), error=True)


# Told of each tool call: the tool (`unknown` for a name no tool has, so that callers
# cannot add labels), whether its result is an error, and its seconds (gateway metrics).
ToolObserver = Callable[[str, bool, float], None]
UNKNOWN_TOOL = "unknown"


def build_mcp_server(
    api: CographApi,
    principal_of: Callable[[Any], requestctx.Principal | None] | None = None,
    on_tool_call: ToolObserver | None = None,
) -> Server[Any]:
    """A low-level MCP server exposing the tools over `api`.

    Over HTTP, `principal_of` reads the caller the HTTP server authenticated from the ASGI
    scope of the request (the gateway's auth middleware); over stdio there is none.
    """

    async def observed_call(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        if on_tool_call is None:
            return await call_tool(api, name, arguments)
        start = time.perf_counter()
        result = await call_tool(api, name, arguments)
        tool = name if name in HANDLERS else UNKNOWN_TOOL
        on_tool_call(tool, bool(result.is_error), time.perf_counter() - start)
        return result

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # Over HTTP the tool runs in the session manager's tasks, outside the request's
        # context: re-establish the principal the auth middleware put on the request.
        request = ctx.request
        scope = getattr(request, "scope", None)
        if scope is None or principal_of is None:
            return await observed_call(params.name, params.arguments)
        token = requestctx.set_principal(principal_of(scope))
        rid = requestctx.set_request_id(requestctx.new_request_id())
        try:
            return await observed_call(params.name, params.arguments)
        finally:
            requestctx.reset_request_id(rid)
            requestctx.reset_principal(token)

    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
    )


@dataclass
class McpHttp:
    """The /mcp endpoint and the session manager whose run() must span the app's life."""

    asgi: StreamableHTTPASGIApp
    manager: StreamableHTTPSessionManager


def mcp_http(server: Server[Any]) -> McpHttp:
    # Stateless with JSON responses: any gateway replica can answer any request, so no
    # sticky sessions are needed behind a load balancer. Authentication is the gateway's
    # own middleware (Bearer API keys), applied before this app is reached.
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    return McpHttp(StreamableHTTPASGIApp(manager), manager)


async def serve_stdio(api: CographApi) -> None:
    """Serves the tools on stdin/stdout until the client closes them (`cograph mcp`)."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(api)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())

"""Every request limit that crosses a process boundary, defined once.

The gateway's request models (and so its OpenAPI schema), the MCP tool schemas and each
service's own validation import these constants, so what a caller is told it may send is
exactly what the service behind it accepts. Limits are constants, not settings: a
deployment cannot silently make the published contract wrong. Lengths count Unicode code
points (Python's len, JSON Schema's maxLength); bounds are inclusive.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# ---- names shared by many requests -----------------------------------------------------

# A repository slug, host/owner/name (search scope, index, access, repository routes).
SLUG_MAX_CHARS: Final = 300
# A collection name, a grant's principal id.
NAME_MAX_CHARS: Final = 200
# A git source (URL or server path) and a collection's server directory.
SOURCE_MAX_CHARS: Final = 4096
BRANCH_MAX_CHARS: Final = 255
# A named ref (branch or tag) of a repository: a branch name's rules and length.
REF_MAX_CHARS: Final = BRANCH_MAX_CHARS
# Indexed refs per repository besides its default branch: each is a whole index.
REFS_PER_REPOSITORY_MAX: Final = 20
# The source's branches and tags a ref listing returns (the rest: remote_truncated).
REMOTE_REFS_MAX: Final = 1000
# Principals granted read access in one indexing request.
GRANTS_MAX: Final = 1000
# Opaque ids in paths: notes, jobs, keys.
ID_MAX_CHARS: Final = 100

# ---- code search (gateway /api/search, MCP cograph_search, retrieval Search) ------------

SEARCH_QUERY_MAX_CHARS: Final = 4000
TOP_K_MIN: Final = 1
TOP_K_MAX: Final = 100
TOP_K_DEFAULT: Final = 10
# The snippet width callers may ask for: 80..4000 characters, default 360. A snippet is a
# preview cut at line boundaries (cograph_read returns any range in full); 360 is the
# widest that gives twice the answers per token of the first build's verbose answer
# (bench/notes/answers-per-token.md, "Answers per token").
SNIPPET_CHARS_MIN: Final = 80
SNIPPET_CHARS_MAX: Final = 4000
SNIPPET_CHARS_DEFAULT: Final = 360
Layer = Literal["code", "ast", "ast_summary", "repo_doc", "md_collection"]
LAYERS: Final[tuple[Layer, ...]] = get_args(Layer)
LAYERS_MAX: Final = len(LAYERS)
# The ranking stages a search request may skip (`skip_stages`): every stage of retrieval's
# pipeline but fusion, in the order they run (retrieval/search/pipeline.py, which checks it).
RankingStage = Literal[
    "name_words",
    "shared_summaries",
    "containment",
    "layer_weights",
    "test_code",
    "pin",
    "overload_order",
]
SKIPPABLE_STAGES: Final[tuple[RankingStage, ...]] = get_args(RankingStage)
# A search's token budget (max_tokens): at least enough for one short result.
MAX_TOKENS_MIN: Final = 50
MAX_TOKENS_MAX: Final = 100_000
# A symbol for the graph call (qualified or bare name).
SYMBOL_MAX_CHARS: Final = 500

# ---- the agent context API: read, files, grep, references ------------------------------

# A file path inside a repository or collection (read, files' prefix).
PATH_MAX_CHARS: Final = 1024
# One read returns at most this many lines and characters; a longer range is cut at a line
# boundary and the answer says where to continue (next_start_line). A single line longer
# than the character cap is cut within the line.
READ_MAX_LINES: Final = 2000
READ_MAX_CHARS: Final = 100_000
# Files per page of a listing.
FILES_LIMIT_MIN: Final = 1
FILES_LIMIT_MAX: Final = 5000
FILES_LIMIT_DEFAULT: Final = 1000
# Grep: the pattern, the path glob, matching lines per answer and the text kept per line.
GREP_PATTERN_MAX_CHARS: Final = 500
GREP_GLOB_MAX_CHARS: Final = 1024
GREP_LIMIT_MIN: Final = 1
GREP_LIMIT_MAX: Final = 1000
GREP_LIMIT_DEFAULT: Final = 100
GREP_LINE_MAX_CHARS: Final = 500
# Lines of context before and after each matching line (0, the default, gives none).
GREP_CONTEXT_MIN: Final = 0
GREP_CONTEXT_MAX: Final = 10
# The most lines one grep answer holds, matching lines and context lines together, across
# every repository it searched: with context, fewer matches than `limit` fit (each counts
# 1 + 2 * context), and the answer says truncated. At 500 characters a line, about 2.5 MB.
GREP_ANSWER_LINES_MAX: Final = 5000
# References per page.
REFERENCES_LIMIT_MIN: Final = 1
REFERENCES_LIMIT_MAX: Final = 500
REFERENCES_LIMIT_DEFAULT: Final = 100
# An opaque paging cursor (files, references).
CURSOR_MAX_CHARS: Final = 2048
# A file's outline: the symbols it holds, at most this many (the first by line).
OUTLINE_MAX_SYMBOLS: Final = 2000

# ---- routing (gateway /api/route, MCP cograph_route, router Route) ----------------------

ROUTE_QUERY_MAX_CHARS: Final = 1000
ROUTE_RESULTS_MIN: Final = 1
ROUTE_RESULTS_MAX: Final = 20  # per pool: repositories, collections
ROUTE_RESULTS_DEFAULT: Final = 3

# ---- collections uploaded or read from the server (retrieval IndexCollection) -----------

COLLECTION_DESCRIPTION_MAX_CHARS: Final = 4000
DOCUMENT_PATH_MAX_CHARS: Final = 1024
DOCUMENTS_MAX: Final = 100_000

# ---- the commons (gateway /v1, MCP commons_*, commons service) --------------------------

POST_TITLE_MAX_CHARS: Final = 200
POST_BODY_MAX_CHARS: Final = 20_000
POST_TAGS_MAX: Final = 10
TAG_MAX_CHARS: Final = 32
COMMENT_MAX_CHARS: Final = 5_000
COMMONS_QUERY_MAX_CHARS: Final = 1_000
# The note listing (GET /v1/posts, MCP commons_recent, the service's ListPosts): notes per
# page, newest first or by score.
POSTS_LIMIT_MIN: Final = 1
POSTS_LIMIT_MAX: Final = 100
POSTS_LIMIT_DEFAULT: Final = 20
PostSort = Literal["new", "top"]
POST_SORTS: Final[tuple[PostSort, ...]] = get_args(PostSort)
# The name a contributor shows beside their contributor number (PUT /v1/me): trimmed, no
# control or format characters, unique ignoring case (commons.profiles).
DISPLAY_NAME_MAX_CHARS: Final = 64
# Moderation (admins): the reason given for hiding, unhiding or deleting another author's
# note or comment, kept in the moderation log; and that log's page size. Moderation has no
# MCP tool (docs/agents.md says why), so these bind the REST routes and the service.
MODERATION_REASON_MAX_CHARS: Final = 500
MODERATION_LOG_LIMIT_MIN: Final = 1
MODERATION_LOG_LIMIT_MAX: Final = 500
MODERATION_LOG_LIMIT_DEFAULT: Final = 100

# Notes anchored to code (POST /v1/posts `anchors`, POST /v1/posts/{id}/anchors, MCP
# commons_post, the commons' and retrieval's anchor calls). An anchor is `{repo, symbol}`
# (SYMBOL_MAX_CHARS) or `{repo, path, start_line, end_line}` (PATH_MAX_CHARS, lines 1-based
# and inclusive, at most ANCHOR_LINE_MAX, a range of at most ANCHOR_LINES_MAX lines).
ANCHORS_PER_POST_MAX: Final = 10
ANCHOR_LINE_MAX: Final = 1_000_000
ANCHOR_LINES_MAX: Final = 10_000
AnchorStatus = Literal["fresh", "body_changed", "signature_changed", "moved", "orphaned"]
ANCHOR_STATUSES: Final[tuple[AnchorStatus, ...]] = get_args(AnchorStatus)
# The review listing (GET /v1/anchors, MCP commons_anchors, `cograph notes anchors`).
ANCHORS_LIMIT_MIN: Final = 1
ANCHORS_LIMIT_MAX: Final = 500
ANCHORS_LIMIT_DEFAULT: Final = 100
# Anchors one staleness check sends retrieval at once (the commons' re-check batches,
# retrieval's RecheckAnchors), and the repositories one check asks about.
ANCHORS_RECHECK_MAX: Final = 500
ANCHOR_REPOSITORIES_MAX: Final = 1000
# Notes shown beside code (the commons' NotesForCode, which retrieval calls once per search,
# read and references page): the code targets one call asks about (a search answer holds
# at most TOP_K_MAX results, so one call covers any of them), and the notes given per
# target (NOTES_PER_TARGET_DEFAULT when the request leaves it 0).
NOTES_TARGETS_MAX: Final = TOP_K_MAX
NOTES_PER_TARGET_MIN: Final = 1
NOTES_PER_TARGET_MAX: Final = 5
NOTES_PER_TARGET_DEFAULT: Final = 3

# ---- API keys (gateway /api/keys) -------------------------------------------------------

KEY_NAME_MAX_CHARS: Final = 100
KEY_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._@:\-]*$"
# Names no key created through the API may have, as its name or its principal (compared
# case-insensitively): `admin` is the principal of the keys `cograph up` and `cograph keys
# bootstrap` store and of the operator commands (cograph_cli.identity), and the others read
# as the system itself in an audit log or a note's authorship. Admin keys with the `admin`
# principal are written only by those two operator paths (cograph_api.admin_keys); the
# gateway's migration 0002 refuses these principals for non-admin keys in the database too.
RESERVED_PRINCIPALS: Final = frozenset(
    {"admin", "administrator", "root", "system", "operator", "anonymous", "public", "cograph"}
)

# ---- HTTP ------------------------------------------------------------------------------

# The default of GATEWAY_MAX_BODY_BYTES: larger bodies (declared or chunked) get 413. A
# deployment may lower or raise it; it is the only limit here that is a setting, because
# it bounds memory, not the meaning of a field.
REQUEST_BODY_MAX_BYTES: Final = 16 * 1024 * 1024

"""The agent context RPCs over gRPC against the real service: ReadFile, ListFiles and Grep
answer from the text stored at index time, under the search access rule (an unreadable
repository is NOT_FOUND like an unknown one), and refuse hostile input."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support import forged_cursors
from tests.integration.support.retrieval import ADMIN, ALICE, SearchEnv
from tests.integration.support.search_corpus import (
    BILLING,
    DEMO,
    HANDBOOK,
    HANDBOOK_DOC,
    VAULT,
    VAULT_CODE,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _code(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code()


async def test_read_returns_the_indexed_lines_at_the_indexed_commit(
    search_env: SearchEnv, tmp_path: Path
) -> None:
    stub = search_env.stub
    whole = await stub.ReadFile(
        pb.ReadFileRequest(repo=DEMO, path="billing/charges.py"), metadata=ALICE, timeout=10
    )
    assert whole.content == BILLING
    assert whole.total_lines == BILLING.count("\n") == whole.end_line
    assert whole.start_line == 1 and not whole.HasField("next_start_line")
    assert whole.language == "python"
    repo = await stub.GetRepository(pb.GetRepositoryRequest(slug=DEMO), metadata=ADMIN)
    assert whole.commit == repo.repository.commit and len(whole.commit) == 40
    part = await stub.ReadFile(
        pb.ReadFileRequest(repo=DEMO, path="billing/charges.py", start_line=5, end_line=6),
        metadata=ALICE,
        timeout=10,
    )
    assert part.content == "".join(BILLING.splitlines(keepends=True)[4:6])
    assert (part.start_line, part.end_line) == (5, 6)


async def test_read_serves_the_index_not_todays_working_tree(search_env: SearchEnv) -> None:
    source = await search_env.pool.fetchval("SELECT source FROM repositories WHERE slug = $1", DEMO)
    target = Path(source) / "billing" / "charges.py"
    original = target.read_text()
    target.write_text("# rewritten after indexing\n")
    try:
        reply = await search_env.stub.ReadFile(
            pb.ReadFileRequest(repo=DEMO, path="billing/charges.py"), metadata=ADMIN, timeout=10
        )
    finally:
        target.write_text(original)
    assert reply.content == BILLING


async def test_read_a_collection_document(search_env: SearchEnv) -> None:
    reply = await search_env.stub.ReadFile(
        pb.ReadFileRequest(collection=HANDBOOK, path="onboarding.md"), metadata=ADMIN, timeout=10
    )
    assert reply.content == HANDBOOK_DOC and reply.collection == HANDBOOK and not reply.repo


async def test_read_refuses_and_hides(search_env: SearchEnv) -> None:
    stub = search_env.stub

    def read(who: tuple[tuple[str, str], ...], **fields: Any) -> Any:
        return stub.ReadFile(pb.ReadFileRequest(**fields), metadata=who, timeout=10)

    # A private repository reads for the admin, and is the same NOT_FOUND as an unknown
    # one for a key without a grant, whichever path is asked for.
    assert (await read(ADMIN, repo=VAULT, path="vault/core.py")).content == VAULT_CODE
    assert await _code(read(ALICE, repo=VAULT, path="vault/core.py")) == grpc.StatusCode.NOT_FOUND
    assert await _code(read(ALICE, repo="example.com/x/none", path="a.py")) == (
        grpc.StatusCode.NOT_FOUND
    )
    # Paths outside the index, skipped files and traversal.
    for path in ("nope.py", "vendor/lib/lib.go", "assets/logo.png", "debug.log"):
        assert await _code(read(ADMIN, repo=DEMO, path=path)) == grpc.StatusCode.NOT_FOUND
    for path in ("../vault/core.py", "/etc/passwd", "billing/../billing/charges.py", "a\x00b", ""):
        assert await _code(read(ADMIN, repo=DEMO, path=path)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        ), path
    assert await _code(read(ADMIN, repo=DEMO, collection=HANDBOOK, path="a.md")) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    assert await _code(read(ADMIN, repo=DEMO, path="billing/charges.py", start_line=999)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )


async def test_files_lists_paths_languages_and_sizes_in_pages(search_env: SearchEnv) -> None:
    stub = search_env.stub
    every = await stub.ListFiles(pb.ListFilesRequest(repo=DEMO), metadata=ALICE, timeout=10)
    paths = [f.path for f in every.files]
    assert paths == sorted(paths) and "billing/charges.py" in paths and not every.truncated
    charges = next(f for f in every.files if f.path == "billing/charges.py")
    assert (charges.language, charges.size) == ("python", len(BILLING.encode()))
    assert "debug.log" not in paths and "vendor/lib/lib.go" not in paths
    under = await stub.ListFiles(pb.ListFilesRequest(repo=DEMO, prefix="pkg/"), metadata=ALICE)
    assert [f.path for f in under.files] == [p for p in paths if p.startswith("pkg/")]
    # Pages of two, followed to the end, give the same list.
    pages: list[str] = []
    cursor = ""
    while True:
        page = await stub.ListFiles(
            pb.ListFilesRequest(repo=DEMO, cursor=cursor, limit=2), metadata=ALICE
        )
        pages.extend(f.path for f in page.files)
        assert page.truncated == bool(page.next_cursor)
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert pages == paths
    first = await stub.ListFiles(pb.ListFilesRequest(repo=DEMO, limit=1), metadata=ALICE)
    # A cursor is bound to its question: another prefix or repository refuses it.
    tampered = pb.ListFilesRequest(repo=DEMO, prefix="pkg/", cursor=first.next_cursor)
    assert await _code(stub.ListFiles(tampered, metadata=ALICE)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    garbage = pb.ListFilesRequest(repo=DEMO, cursor=first.next_cursor[:-3] + "AAA")
    assert await _code(stub.ListFiles(garbage, metadata=ALICE)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    assert await _code(stub.ListFiles(pb.ListFilesRequest(repo=VAULT), metadata=ALICE)) == (
        grpc.StatusCode.NOT_FOUND
    )
    for prefix in ("../", "/etc", "a\x00"):
        request = pb.ListFilesRequest(repo=DEMO, prefix=prefix)
        assert await _code(stub.ListFiles(request, metadata=ALICE)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )


async def test_grep_literal_and_regex(search_env: SearchEnv) -> None:
    stub = search_env.stub
    literal = await stub.Grep(
        pb.GrepRequest(repo=DEMO, pattern="submit_charge("), metadata=ALICE, timeout=10
    )
    lines = BILLING.splitlines()
    expected = [
        ("billing/charges.py", i + 1, line)
        for i, line in enumerate(lines)
        if "submit_charge(" in line
    ]
    assert [(m.path, m.line, m.text) for m in literal.matches] == expected
    assert not literal.truncated and len(literal.commit) == 40
    # Literal means literal: regular-expression and LIKE characters match themselves.
    dotted = await stub.Grep(pb.GrepRequest(repo=DEMO, pattern="2 ** attempt"), metadata=ALICE)
    assert [m.line for m in dotted.matches] == [
        i + 1 for i, line in enumerate(lines) if "2 ** attempt" in line
    ]
    assert not (await stub.Grep(pb.GrepRequest(repo=DEMO, pattern="%_%"), metadata=ALICE)).matches
    regex = await stub.Grep(
        pb.GrepRequest(repo=DEMO, pattern=r"^def \w+_charge", regex=True, path_glob="billing/*"),
        metadata=ALICE,
    )
    assert [m.text.split("(")[0] for m in regex.matches] == [
        "def retry_failed_charge",
        "def submit_charge",
    ]
    capped = await stub.Grep(pb.GrepRequest(repo=DEMO, pattern="charge", limit=2), metadata=ALICE)
    assert len(capped.matches) == 2 and capped.truncated
    # A limit is the first lines in path and line order, across files, whatever it cuts.
    every = await stub.Grep(pb.GrepRequest(repo=DEMO, pattern="charge", limit=500), metadata=ALICE)
    found = [(m.path, m.line) for m in every.matches]
    assert len({path for path, _ in found}) >= 2 and found == sorted(found)
    for limit in range(1, len(found) + 1):
        cut = await stub.Grep(
            pb.GrepRequest(repo=DEMO, pattern="charge", limit=limit), metadata=ALICE
        )
        assert [(m.path, m.line) for m in cut.matches] == found[:limit]
        assert cut.truncated == (limit < len(found))
    globbed = await stub.Grep(
        pb.GrepRequest(repo=DEMO, pattern="charge", path_glob="*.md"), metadata=ALICE
    )
    assert globbed.matches and all(m.path.endswith(".md") for m in globbed.matches)


async def test_grep_refuses_and_bounds(search_env: SearchEnv) -> None:
    stub = search_env.stub

    def grep(who: tuple[tuple[str, str], ...], **fields: Any) -> Any:
        return stub.Grep(pb.GrepRequest(**fields), metadata=who, timeout=30)

    assert (await grep(ADMIN, repo=VAULT, pattern="unlock_vault")).matches
    assert await _code(grep(ALICE, repo=VAULT, pattern="unlock_vault")) == (
        grpc.StatusCode.NOT_FOUND
    )
    for fields in (
        {"pattern": "(unclosed", "regex": True},
        {"pattern": "a{2,1}", "regex": True},
        {"pattern": "(?i)x", "regex": True},
        {"pattern": ""},
        {"pattern": "x" * 501},
        {"pattern": "a\x00b"},
        {"pattern": "x", "limit": 0},
        {"pattern": "x", "limit": 1001},
    ):
        assert await _code(grep(ALICE, repo=DEMO, **fields)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        ), fields
    # Patterns that make backtracking engines explode answer quickly (or hit the deadline).
    started = time.monotonic()
    for pattern in (r"(a+)+$", r"(x+x+)+y", r"(.*a){12}", r"((a|aa)+)+b"):
        try:
            await grep(ALICE, repo=DEMO, pattern=pattern, regex=True)
        except grpc.aio.AioRpcError as err:
            assert err.code() in (
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.INVALID_ARGUMENT,
            ), err
    assert time.monotonic() - started < 25


async def test_grep_refuses_patterns_whose_cost_is_unbounded(search_env: SearchEnv) -> None:
    # The penetration test's patterns: the first slowed every other search, the second ran
    # 12.5 s past the statement timeout, the third made PostgreSQL ask for 1.6 GB (502).
    stub = search_env.stub
    started = time.monotonic()
    for pattern in ("(a{1,100}){1,100}$", "(a{1,140}){1,140}b", "(a{1,200}){1,200}b", r"(a)\1"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Grep(
                pb.GrepRequest(repo=DEMO, pattern=pattern, regex=True), metadata=ALICE, timeout=30
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, pattern
        assert "pattern" in (refused.value.details() or "")
    assert time.monotonic() - started < 2  # refused before any statement runs
    # Counted repetitions within the bound still run.
    bounded = await stub.Grep(
        pb.GrepRequest(repo=DEMO, pattern=r"(char){1,3}ge{1,10}", regex=True, limit=1),
        metadata=ALICE,
        timeout=10,
    )
    assert bounded.matches


OVERLOADS = '''from typing import overload


class Context:
    @overload
    def invoke(self, x: int) -> int: ...

    @overload
    def invoke(self, x: str) -> str: ...

    def invoke(self, x):
        """The implementation."""
        return self.helper(x)

    def helper(self, x):
        return x

'''
CALLERS = "".join(
    f"    def caller_{i:02d}(self):\n        return self.invoke({i})\n\n" for i in range(12)
)
OVERLOADS_REPO = "example.com/team/overloads"


async def _index_overloads(env: SearchEnv) -> None:
    from tests.integration.support.git_repos import JAN, commit_all, git, write
    from tests.integration.support.retrieval import wait_job

    root = env.data_dir.parent / "overloads"
    if (root / ".git").exists():
        return
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "ctx/context.py", OVERLOADS + CALLERS)
    commit_all(root, "overloads", JAN)
    request = pb.IndexRepositoryRequest(source=str(root), slug=OVERLOADS_REPO, public=True)
    job = (await env.stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job
    await wait_job(env.stub, job.id)


async def test_references_put_the_implementation_first_and_page(search_env: SearchEnv) -> None:
    await _index_overloads(search_env)
    stub = search_env.stub
    first = await stub.References(
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol="Context.invoke", limit=5),
        metadata=ALICE,
        timeout=10,
    )
    names = [d.qualified_name for d in first.definitions]
    assert len(names) == 3 and names[0] == "ctx.context.Context.invoke#3", names
    implementation = first.definitions[0]
    assert "def invoke(self, x):" in implementation.signature or implementation.start_line == 12
    seen = [(r.path, r.symbol, r.kind) for r in first.references]
    assert first.truncated and first.next_cursor and len(seen) == 5
    cursor = first.next_cursor
    while cursor:
        page = await stub.References(
            pb.ReferencesRequest(
                repo=OVERLOADS_REPO, symbol="Context.invoke", limit=5, cursor=cursor
            ),
            metadata=ALICE,
        )
        seen.extend((r.path, r.symbol, r.kind) for r in page.references)
        cursor = page.next_cursor
    callers = sorted(s for _, s, _ in seen)
    assert callers == sorted(f"ctx.context.Context.caller_{i:02d}" for i in range(12))
    assert {k for _, _, k in seen} == {pb.EDGE_KIND_CALLS}
    # The graph starts from the implementation, which has the callee.
    graph = await stub.Graph(
        pb.GraphRequest(repo=OVERLOADS_REPO, symbol="Context.invoke"), metadata=ALICE
    )
    assert graph.definitions[0].qualified_name == "ctx.context.Context.invoke#3"
    neighbours = {n.qualified_name for n in graph.graph.nodes}
    assert "ctx.context.Context.helper" in neighbours


async def test_references_refuse_and_hide(search_env: SearchEnv) -> None:
    stub = search_env.stub
    reply = await stub.References(
        pb.ReferencesRequest(repo=DEMO, symbol="submit_charge"), metadata=ALICE, timeout=10
    )
    assert [d.qualified_name for d in reply.definitions] == ["billing.charges.submit_charge"]
    assert [(r.symbol, r.kind) for r in reply.references] == [
        ("billing.charges.retry_failed_charge", pb.EDGE_KIND_CALLS)
    ]
    assert not reply.truncated and not reply.next_cursor
    hidden = pb.ReferencesRequest(repo=VAULT, symbol="unlock_vault")
    assert (await stub.References(hidden, metadata=ADMIN)).references
    assert await _code(stub.References(hidden, metadata=ALICE)) == grpc.StatusCode.NOT_FOUND
    await _index_overloads(search_env)
    page = await stub.References(
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol="Context.invoke", limit=2),
        metadata=ALICE,
    )
    for bad in (
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol="Context.helper", cursor=page.next_cursor),
        pb.ReferencesRequest(repo=DEMO, symbol="Context.invoke", cursor=page.next_cursor),
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol="Context.invoke", cursor="e30"),
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol="Context.invoke", limit=501),
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol=""),
    ):
        assert await _code(stub.References(bad, metadata=ALICE)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        ), bad


FLASKLIKE_REPO = "example.com/team/flasklike"


async def test_references_find_every_decorator_use_with_its_line(search_env: SearchEnv) -> None:
    """`@app.route` on an app made in another module, `@admin.route` on a blueprint, a
    plain `app.route(...)` call and a parameter annotated with the class all land on the
    one `route` the base class defines, each with the line of the use; a receiver whose
    type nothing states, and another class's `route`, do not. Rows an earlier release
    wrote, with no lines, answer the enclosing node's first line."""
    from tests.flasklike import FILES, ROUTE_USES
    from tests.integration.support.git_repos import JAN, commit_all, git, write
    from tests.integration.support.retrieval import wait_job

    root = search_env.data_dir.parent / "flasklike"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for path, text in FILES.items():
        write(root, path, text)
    commit_all(root, "flasklike", JAN)
    request = pb.IndexRepositoryRequest(source=str(root), slug=FLASKLIKE_REPO, public=True)
    job = (await search_env.stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job
    await wait_job(search_env.stub, job.id)

    stub = search_env.stub
    seen: list[tuple[str, int, str]] = []
    cursor = ""
    while True:  # pages of 3 split one edge's lines (mount's two calls) across pages
        page = await stub.References(
            pb.ReferencesRequest(
                repo=FLASKLIKE_REPO, symbol="Scaffold.route", limit=3, cursor=cursor
            ),
            metadata=ALICE,
            timeout=10,
        )
        assert [d.qualified_name for d in page.definitions] == ["flasky.scaffold.Scaffold.route"]
        assert {r.kind for r in page.references} <= {pb.EDGE_KIND_CALLS}
        seen.extend((r.path, r.line, r.symbol) for r in page.references)
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == sorted(ROUTE_USES)

    # By the bare name too: both `route` methods, each use once, no decoy counted twice.
    bare = await stub.References(
        pb.ReferencesRequest(repo=FLASKLIKE_REPO, symbol="route"), metadata=ALICE
    )
    assert len(bare.definitions) == 2
    by_target: dict[str, list[int]] = {}
    for r in bare.references:
        by_target.setdefault(r.target, []).append(r.line)
    router = next(d.id for d in bare.definitions if d.qualified_name.endswith("Router.route"))
    assert by_target.pop(router) == [30]  # router.route("/elsewhere"); unknown.route is none
    assert sorted(line for lines in by_target.values() for line in lines) == sorted(
        line for _, line, _ in ROUTE_USES
    )

    # An edge an earlier release wrote has no lines: its reference is the enclosing node's.
    async with search_env.pool.acquire() as conn:
        await conn.execute(
            """
            UPDATE code_edges e SET lines = NULL FROM code_nodes n
            WHERE n.id = e.src_node_id AND n.qualified_name = 'shop.views.mount'
              AND e.kind = 'calls'
            """
        )
    again = await stub.References(
        pb.ReferencesRequest(repo=FLASKLIKE_REPO, symbol="Scaffold.route"), metadata=ALICE
    )
    mount = [
        (r.line, r.start_line, r.end_line)
        for r in again.references
        if r.symbol == "shop.views.mount"
    ]
    assert mount == [(18, 18, 20)]


async def test_forged_cursors_are_invalid_argument_never_an_internal_error(
    search_env: SearchEnv,
) -> None:
    """A forged cursor (the old unsigned format, whose checksum anyone could compute, or
    one signed with the secret) holding a line beyond PostgreSQL's integer or a NUL in its
    path once failed in the statement; now it is refused before any statement runs."""
    stub = search_env.stub
    await _index_overloads(search_env)
    symbol = "Context.invoke"
    scope = forged_cursors.refs_scope(OVERLOADS_REPO, symbol)
    for cursor in forged_cursors.forgeries("refs", scope, forged_cursors.HOSTILE_REFS_POSITIONS):
        request = pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol=symbol, cursor=cursor)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.References(request, metadata=ALICE, timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, cursor
        assert "cursor" in (caught.value.details() or ""), cursor
    # The unsigned format with a position that is fine otherwise: refused all the same.
    plain = forged_cursors.unsigned("refs", scope, ["ctx/context.py", 1, 1])
    request = pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol=symbol, cursor=plain)
    assert await _code(stub.References(request, metadata=ALICE)) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    files_scope = forged_cursors.files_scope(DEMO)
    for cursor in forged_cursors.forgeries(
        "files", files_scope, forged_cursors.HOSTILE_FILES_POSITIONS
    ):
        listing = pb.ListFilesRequest(repo=DEMO, cursor=cursor)
        assert await _code(stub.ListFiles(listing, metadata=ALICE)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        ), cursor
    # A cursor the service issued still pages.
    first = await stub.References(
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol=symbol, limit=5), metadata=ALICE
    )
    second = await stub.References(
        pb.ReferencesRequest(repo=OVERLOADS_REPO, symbol=symbol, limit=5, cursor=first.next_cursor),
        metadata=ALICE,
    )
    assert second.references and {r.symbol for r in second.references}.isdisjoint(
        {r.symbol for r in first.references}
    )


async def test_search_within_a_token_budget(search_env: SearchEnv) -> None:
    query = "retry a failed charge with backoff"
    free = await search_env.search(query, metadata=ALICE, top_k=20)
    assert free.tokens > 0 and free.omitted == 0
    for budget in (50, 120, 400, 2000):
        reply = await search_env.search(query, metadata=ALICE, max_tokens=budget)
        assert 0 <= reply.tokens <= budget, (budget, reply.tokens)
        spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for r in reply.results:
            for start, end in spans.get((r.path, r.layer), []):
                # No result lies inside another of its file and layer.
                assert not (start <= r.start_line and r.end_line <= end), r
            spans.setdefault((r.path, r.layer), []).append((r.start_line, r.end_line))
    tight = await search_env.search(query, metadata=ALICE, max_tokens=50)
    roomy = await search_env.search(query, metadata=ALICE, max_tokens=2000)
    assert len(tight.results) <= len(roomy.results) and tight.omitted >= 1
    for bad in (49, 100_001):
        assert await _code(search_env.search(query, metadata=ALICE, max_tokens=bad)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )


async def test_outline_nests_a_files_symbols_in_line_order(search_env: SearchEnv) -> None:
    stub = search_env.stub
    got = await stub.Outline(
        pb.OutlineRequest(repo=DEMO, path="pkg/config.py"), metadata=ALICE, timeout=10
    )
    assert (got.repo, got.path, got.language) == (DEMO, "pkg/config.py", "python")
    repo = await stub.GetRepository(pb.GetRepositoryRequest(slug=DEMO), metadata=ADMIN)
    assert got.commit == repo.repository.commit and not got.truncated
    [parse_config] = got.symbols  # the module itself is no symbol
    assert (parse_config.name, parse_config.kind) == ("ParseConfig", "class")
    assert [m.name for m in parse_config.children] == ["load", "parse", "validate"]
    assert all(m.kind == "method" and not m.children for m in parse_config.children)
    lines = [(m.start_line, m.end_line) for m in parse_config.children]
    assert lines == sorted(lines) and parse_config.start_line < lines[0][0]
    assert lines[-1][1] <= parse_config.end_line
    assert parse_config.children[0].signature.startswith("def load(")
    # A file without symbols (markdown) has an empty outline; a file not indexed, an
    # unreadable repository and hostile paths are refused like read refuses them.
    docs = await stub.Outline(
        pb.OutlineRequest(repo=DEMO, path="docs/billing.md"), metadata=ALICE, timeout=10
    )
    assert list(docs.symbols) == [] and docs.language == "markdown"
    for request, metadata, code in (
        (pb.OutlineRequest(repo=DEMO, path="pkg/missing.py"), ALICE, grpc.StatusCode.NOT_FOUND),
        (pb.OutlineRequest(repo=VAULT, path="vault/core.py"), ALICE, grpc.StatusCode.NOT_FOUND),
        (
            pb.OutlineRequest(repo=DEMO, path="../etc/passwd"),
            ADMIN,
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (pb.OutlineRequest(repo=DEMO, path="pkg/\0.py"), ADMIN, grpc.StatusCode.INVALID_ARGUMENT),
        (pb.OutlineRequest(repo="", path="pkg/config.py"), ADMIN, grpc.StatusCode.INVALID_ARGUMENT),
    ):
        assert await _code(stub.Outline(request, metadata=metadata, timeout=10)) == code
    vault = await stub.Outline(
        pb.OutlineRequest(repo=VAULT, path="vault/core.py"), metadata=ADMIN, timeout=10
    )
    assert [s.name for s in vault.symbols][:1] == ["open_vault"]


# ---------------------------------------------------------------- grep across repositories


async def test_grep_without_repo_reads_every_readable_repository_and_no_other(
    search_env: SearchEnv,
) -> None:
    await _index_overloads(search_env)
    stub = search_env.stub

    def grep(who: tuple[tuple[str, str], ...], **fields: Any) -> Any:
        return stub.Grep(pb.GrepRequest(**fields), metadata=who, timeout=10)

    admin = await grep(ADMIN, pattern="def ", limit=1000)
    found = [(m.repo, m.path, m.line) for m in admin.matches]
    assert found == sorted(found) and not admin.truncated
    assert {DEMO, VAULT, OVERLOADS_REPO} <= {repo for repo, _, _ in found}
    assert not admin.commit and set(admin.commits) == {repo for repo, _, _ in found}
    demo = await stub.GetRepository(pb.GetRepositoryRequest(slug=DEMO), metadata=ADMIN)
    assert admin.commits[DEMO] == demo.repository.commit
    # The limit counts across repositories: each cut is the head of the whole answer.
    first_vault = next(i for i, (repo, _, _) in enumerate(found) if repo == VAULT)
    for limit in (1, first_vault + 1, len(found) - 1):
        cut = await grep(ADMIN, pattern="def ", limit=limit)
        assert [(m.repo, m.path, m.line) for m in cut.matches] == found[:limit]
        assert cut.truncated
    # A key without a grant on the vault asks the same: the vault's lines are not there.
    alice = await grep(ALICE, pattern="def ", limit=1000)
    assert [(m.repo, m.path, m.line) for m in alice.matches] == [f for f in found if f[0] != VAULT]
    assert VAULT not in alice.commits
    # Questions only the vault answers: an empty answer for her, never an error.
    for fields in (
        {"pattern": "secret_key"},
        {"pattern": r"unlock_\w+", "regex": True},
        {"pattern": "UNLOCK_VAULT", "case_insensitive": True},
        {"pattern": "def", "path_glob": "vault/*"},
        {"pattern": "treasure", "context": 10},
    ):
        assert (await grep(ADMIN, **fields)).matches, fields
        hidden = await grep(ALICE, **fields)
        assert not hidden.matches and not hidden.truncated and not hidden.commits, fields
    # Naming the vault stays NOT_FOUND, like a repository that does not exist.
    assert await _code(grep(ALICE, repo=VAULT, pattern="def")) == grpc.StatusCode.NOT_FOUND


async def test_grep_case_insensitive_literal_and_regex(search_env: SearchEnv) -> None:
    stub = search_env.stub

    async def lines(**fields: Any) -> list[tuple[int, str]]:
        reply = await stub.Grep(
            pb.GrepRequest(repo=DEMO, path_glob="billing/*", **fields), metadata=ALICE, timeout=10
        )
        assert all(m.repo == DEMO for m in reply.matches)
        return [(m.line, m.text) for m in reply.matches]

    billing = BILLING.splitlines()
    calls = [(i + 1, line) for i, line in enumerate(billing) if "submit_charge(" in line]
    assert await lines(pattern="SUBMIT_Charge(") == []
    assert await lines(pattern="SUBMIT_Charge(", case_insensitive=True) == calls
    # Still literal: LIKE's characters match themselves in either case.
    assert await lines(pattern="%_%", case_insensitive=True) == []
    assert await lines(pattern="2 ** ATTEMPT", case_insensitive=True) == [
        (i + 1, line) for i, line in enumerate(billing) if "2 ** attempt" in line
    ]
    defs = [(i + 1, line) for i, line in enumerate(billing) if line.startswith("def ")]
    assert await lines(pattern=r"^DEF \w+_CHARGE", regex=True) == []
    assert await lines(pattern=r"^DEF \w+_CHARGE", regex=True, case_insensitive=True) == defs
    # (?i) stays refused (the field says it), and the cost guard holds either way.
    for pattern in ("(?i)def", "(?i:def)", "(a{1,100}){1,100}$", r"(a)\1"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await lines(pattern=pattern, regex=True, case_insensitive=True)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, pattern
    with pytest.raises(grpc.aio.AioRpcError) as inline:
        await lines(pattern="(?i)def", regex=True)
    assert "case_insensitive" in (inline.value.details() or "")


async def test_grep_context_stops_at_the_file_edges(search_env: SearchEnv) -> None:
    stub = search_env.stub
    billing = BILLING.splitlines()
    assert len(billing) == 16

    async def around(pattern: str, context: int, **fields: Any) -> list[tuple[int, Any, Any]]:
        reply = await stub.Grep(
            pb.GrepRequest(
                repo=DEMO,
                pattern=pattern,
                path_glob="billing/charges.py",
                context=context,
                **fields,
            ),
            metadata=ALICE,
            timeout=10,
        )
        return [(m.line, list(m.before), list(m.after)) for m in reply.matches]

    # The first line has nothing before it; the last nothing after it (the final newline
    # starts no line).
    assert await around("Billing: charging", 3) == [(1, [], billing[1:4])]
    assert await around("return bool(charge_id)", 3) == [(16, billing[12:15], [])]
    assert await around("Billing: charging", 10) == [(1, [], billing[1:11])]
    assert await around("return bool(charge_id)", 10) == [(16, billing[5:15], [])]
    # Overlapping contexts each come whole.
    assert await around("submit_charge(", 6) == [
        (8, billing[1:7], billing[8:14]),
        (14, billing[7:13], billing[14:16]),
    ]
    assert await around(r"^DEF SUBMIT", 10, regex=True, case_insensitive=True) == [
        (14, billing[3:13], billing[14:16])
    ]
    assert await around("submit_charge(", 0) == [(8, [], []), (14, [], [])]
    # Across repositories, each match's context comes from its own file.
    everywhere = await stub.Grep(
        pb.GrepRequest(pattern="return unlock_vault(", context=1), metadata=ADMIN, timeout=10
    )
    vault = VAULT_CODE.splitlines()
    assert [(m.repo, m.line, list(m.before), list(m.after)) for m in everywhere.matches] == [
        (VAULT, 3, vault[1:2], vault[3:4])
    ]
    for context in (-1, 11):
        request = pb.GrepRequest(repo=DEMO, pattern="charge", context=context)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Grep(request, metadata=ALICE, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, context
        assert "context" in (refused.value.details() or "")

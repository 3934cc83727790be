"""Test code is classed when it is indexed and weighed down by what is stored: the indexer
sets code_nodes.is_test from cograph_text.paths, search multiplies such a result's fused
score by RETRIEVAL_TEST_CODE_WEIGHT (and by nothing else: flip the stored flag and the score
follows it, whatever the path says), and the upgrade (retrieval migrations 0012 and 0013)
classes the nodes an earlier release stored with exactly the rule the indexer applies.
Through the real service: PostgreSQL, the embedder, the indexer, gRPC."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from cograph_text.paths import is_test_path
from retrieval.app import MIGRATIONS
from svckit.db import ensure_extensions
from svckit.migrations import migrate
from tests.integration.support.git_repos import JAN, commit_all, git, write
from tests.integration.support.retrieval import ADMIN, serving, wait_job
from tests.unit.test_text_paths import CASES

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLUG = "example.com/team/billing"
CODE = '''\
def backoff_delay(attempt: int, base: float = 0.5) -> float:
    """How long to wait before the next retry of a failed charge: doubles each attempt."""
    return base * (2 ** attempt)
'''
TEST = '''\
from pkg.retry import backoff_delay


def test_backoff_delay_doubles_each_attempt() -> None:
    """The wait before the next retry of a failed charge doubles each attempt."""
    assert backoff_delay(1) == 2 * backoff_delay(0)
'''
TEST_FILE = "tests/test_retry.py"
QUESTION = "wait before the next retry of a failed charge doubles each attempt"


async def _scores(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
) -> dict[tuple[str, str], float]:
    """(path, qualified name) -> fused score of each code result."""
    reply = await stub.Search(
        pb.SearchRequest(query=QUESTION, repo=SLUG, top_k=10, layers=[pb.LAYER_CODE]),
        metadata=ADMIN,
        timeout=30,
    )
    return {(r.path, r.qualified_name): r.score for r in reply.results}


async def test_a_test_files_nodes_are_stored_as_test_code_and_weighed_down(
    fresh_db_url: str, embedder_address: str, tmp_path: Path
) -> None:
    root = tmp_path / "billing"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "pkg/__init__.py", "")
    write(root, "pkg/retry.py", CODE)
    write(root, TEST_FILE, TEST)
    commit_all(root, "retry backoff", JAN)

    # Unweighted: what the streams alone give each result.
    async with serving(
        fresh_db_url, tmp_path / "a", embedder_address, RETRIEVAL_TEST_CODE_WEIGHT="1"
    ) as (app, stub):
        started = await stub.IndexRepository(
            pb.IndexRepositoryRequest(source=str(root), slug=SLUG), metadata=ADMIN, timeout=10
        )
        await wait_job(stub, started.job.id)
        stored = await app.pool.fetch("SELECT path, qualified_name, is_test FROM code_nodes")
        unweighted = await _scores(stub)

    # Every node of the test file, and only those, is stored as test code.
    assert {r["path"] for r in stored} >= {"pkg/retry.py", TEST_FILE}
    assert all(r["is_test"] == (r["path"] == TEST_FILE) for r in stored), stored
    tests = {key for key in unweighted if key[0] == TEST_FILE}
    assert tests and tests != set(unweighted), unweighted

    # The service's default weight (0.5) halves the test code's scores and no other.
    async with serving(fresh_db_url, tmp_path / "b", embedder_address) as (app, stub):
        weighted = await _scores(stub)
        assert weighted.keys() == unweighted.keys()
        for key, score in unweighted.items():
            assert weighted[key] == pytest.approx(score * (0.5 if key in tests else 1.0)), key
        # The code it tests now ranks above the test.
        order = list(weighted)
        assert order.index(next(k for k in order if k[0] == "pkg/retry.py")) < min(
            order.index(k) for k in tests
        ), weighted

        # What is weighed is the stored class, not the path.
        await app.pool.execute("UPDATE code_nodes SET is_test = false WHERE path = $1", TEST_FILE)
        assert await _scores(stub) == pytest.approx(unweighted)


# Besides the unit cases: a final newline ends no path (PostgreSQL's `\Z` and Python's agree).
EXTRA_PATHS = ("pkg/x_test.go\n", "FooTest.java\n", "tests/\n", "pkg/x_test.go")


async def test_the_upgrade_classes_the_nodes_an_earlier_release_stored(
    fresh_db_url: str, tmp_path: Path
) -> None:
    earlier = tmp_path / "earlier-migrations"
    earlier.mkdir()
    for migration in sorted(MIGRATIONS.glob("*.sql")):
        if int(migration.name[:4]) < 12:
            shutil.copy(migration, earlier / migration.name)
    await ensure_extensions(fresh_db_url)
    assert await migrate(fresh_db_url, "retrieval", earlier) == list(range(1, 12))

    paths = [path for path, _ in CASES] + list(EXTRA_PATHS)
    conn = await asyncpg.connect(fresh_db_url)
    try:
        repository_id = await conn.fetchval(
            "INSERT INTO repositories (slug, source, source_kind, published_generation) "
            "VALUES ($1, '/src/old', 'git', 1) RETURNING id",
            SLUG,
        )
        await conn.executemany(
            "INSERT INTO code_nodes (repository_id, path, language, qualified_name, name, kind, "
            "start_line, end_line, body, content_hash, tsv, generation) "
            "VALUES ($1, $2, 'python', $3, 'f', 'function', 1, 2, 'pass', 'h', "
            "to_tsvector('simple', 'f'), 1)",
            [(repository_id, path, f"m{i}.f") for i, path in enumerate(paths)],
        )

        latest = max(int(migration.name[:4]) for migration in MIGRATIONS.glob("*.sql"))
        assert await migrate(fresh_db_url, "retrieval", MIGRATIONS) == list(range(12, latest + 1))
        rows = await conn.fetch("SELECT path, is_test FROM code_nodes ORDER BY id")
    finally:
        await conn.close()

    classed = {row["path"]: row["is_test"] for row in rows}
    assert list(classed) == list(dict.fromkeys(paths))
    assert {path: is_test_path(path) for path in classed} == classed
    assert {path: test for path, test in CASES} == {path: classed[path] for path, _ in CASES}
    assert not classed["pkg/x_test.go\n"] and classed["pkg/x_test.go"]

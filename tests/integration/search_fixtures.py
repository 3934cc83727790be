"""Shared fixtures of the search tests: one database per test module, holding a public
demo repository with a dated git history, a private repository, and a collection, indexed
through the real retrieval service with the real embedder. (No tests live here.)"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from retrieval.app import RetrievalApp, start_retrieval
from retrieval.settings import RetrievalSettings
from svckit.config import Env
from svckit.db import create_database, drop_database
from tests.integration.test_indexing_fixtures import commit_all, make_repo, write
from tests.internal_auth import signed_channel, with_secret

ADMIN = (("x-cograph-principal", "root"), ("x-cograph-admin", "1"))
ALICE = (("x-cograph-principal", "alice"), ("x-cograph-admin", "0"))
BOB = (("x-cograph-principal", "bob"), ("x-cograph-admin", "0"))

DEMO = "example.com/team/demo"
VAULT = "example.com/team/vault"
HANDBOOK = "handbook"
JUN = "2024-06-01T00:00:00+00:00"

BILLING = '''"""Billing: charging customers and recovering from failures."""
import time


def retry_failed_charge(charge_id: str, attempts: int = 3) -> bool:
    """Retry a failed credit card charge with exponential backoff until it succeeds."""
    for attempt in range(attempts):
        if submit_charge(charge_id):
            return True
        time.sleep(2 ** attempt)
    return False


def submit_charge(charge_id: str) -> bool:
    """Send one charge to the payment processor."""
    return bool(charge_id)
'''

BILLING_DOC = """# Billing

## Retries

When a charge fails, the billing service retries it with exponential backoff: three
attempts, waiting one, two and four seconds. After the last attempt the invoice is marked
unpaid and the customer is emailed.

## Refunds

Refunds are issued by support staff from the admin console.
"""

VAULT_CODE = '''def open_vault(secret_key: str) -> str:
    """Opens the treasure vault with the secret key."""
    return unlock_vault(secret_key)


def unlock_vault(secret_key: str) -> str:
    """Turns the vault's lock."""
    return secret_key[::-1]
'''

HANDBOOK_DOC = """# Onboarding

## Laptops

New engineers receive a laptop on their first day; the vault password is in the safe.

## Holidays

Holidays are booked in the HR tool.
"""


def make_search_repo(root: Path) -> Path:
    """The indexing fixture (January, March) plus a June commit adding billing."""
    make_repo(root)
    write(root, "billing/__init__.py", "")
    write(root, "billing/charges.py", BILLING)
    write(root, "docs/billing.md", BILLING_DOC)
    commit_all(root, "billing retries", JUN)
    return root


def make_vault_repo(root: Path) -> Path:
    from tests.integration.test_indexing_fixtures import git

    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "vault/core.py", VAULT_CODE)
    commit_all(root, "vault", JUN)
    return root


def retrieval_settings(
    db_url: str, data_dir: Path, embedder_addr: str, **extra: str
) -> RetrievalSettings:
    return RetrievalSettings.from_env(
        Env(
            with_secret(
                {
                    "COGRAPH_DATABASE_URL": db_url,
                    "COGRAPH_DATA_DIR": str(data_dir),
                    "RETRIEVAL_LISTEN": "127.0.0.1:0",
                    "EMBEDDER_ADDR": embedder_addr,
                    **extra,
                }
            )
        )
    )


@asynccontextmanager
async def serving(
    db_url: str, data_dir: Path, embedder_addr: str, **extra: str
) -> AsyncIterator[tuple[RetrievalApp, retrieval_pb2_grpc.RetrievalServiceAsyncStub]]:
    """Another retrieval server on the same database (other settings), with a stub."""
    app = await start_retrieval(retrieval_settings(db_url, data_dir, embedder_addr, **extra))
    try:
        async with signed_channel(f"127.0.0.1:{app.port}") as channel:
            yield app, retrieval_pb2_grpc.RetrievalServiceStub(channel)
    finally:
        await app.stop()


async def wait_job(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, job_id: str, timeout_s: float = 180
) -> pb.Job:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        reply = await stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=ADMIN, timeout=5)
        if reply.job.state in (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED):
            assert reply.job.state == pb.JOB_STATE_SUCCEEDED, reply.job.error
            return reply.job
        assert asyncio.get_running_loop().time() < deadline, reply.job
        await asyncio.sleep(0.1)


@dataclass
class SearchEnv:
    db_url: str
    data_dir: Path
    embedder_addr: str
    app: RetrievalApp
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub
    pool: asyncpg.Pool

    async def search(
        self,
        query: str,
        metadata: tuple[tuple[str, str], ...] = ADMIN,
        stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub | None = None,
        **fields: object,
    ) -> pb.SearchResponse:
        request = pb.SearchRequest(query=query, **fields)  # type: ignore[arg-type]
        return await (stub or self.stub).Search(request, metadata=metadata, timeout=30)


async def _index(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    request: pb.IndexRepositoryRequest | pb.IndexCollectionRequest,
) -> None:
    if isinstance(request, pb.IndexRepositoryRequest):
        job = (await stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job
    else:
        job = (await stub.IndexCollection(request, metadata=ADMIN, timeout=10)).job
    await wait_job(stub, job.id)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def search_env(
    pg_server_url: str,
    embedder_address: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> AsyncIterator[SearchEnv]:
    """A module may set SEARCH_SETTINGS (retrieval settings by name) for its service."""
    extra: dict[str, str] = getattr(request.module, "SEARCH_SETTINGS", {})
    name = f"s_{uuid.uuid4().hex[:12]}"
    db_url = await create_database(pg_server_url, name)
    base = tmp_path_factory.mktemp("search")
    demo = make_search_repo(base / "demo")
    vault = make_vault_repo(base / "vault")
    handbook = base / "handbook"
    handbook.mkdir()
    (handbook / "onboarding.md").write_text(HANDBOOK_DOC)
    try:
        async with serving(db_url, base / "data", embedder_address, **extra) as (app, stub):
            await _index(stub, pb.IndexRepositoryRequest(source=str(demo), slug=DEMO, public=True))
            await _index(stub, pb.IndexRepositoryRequest(source=str(vault), slug=VAULT))
            await _index(
                stub,
                pb.IndexCollectionRequest(
                    name=HANDBOOK, description="engineering handbook", directory=str(handbook)
                ),
            )
            yield SearchEnv(db_url, base / "data", embedder_address, app, stub, app.pool)
    finally:
        await drop_database(pg_server_url, name)


def ranked(response: pb.SearchResponse) -> list[tuple[str, int]]:
    """(id, layer) pairs in result order: what determinism compares."""
    return [(r.id, r.layer) for r in response.results]


def stream_names(result: pb.SearchResult) -> Mapping[int, pb.Provenance]:
    return {p.stream: p for p in result.provenance}

"""The corpus of the search tests: a public demo repository with a dated git history (the
indexing repository plus a June commit adding billing), a private repository and a
collection, and `index_corpus`, which indexes all three through a retrieval stub."""

from __future__ import annotations

from pathlib import Path

from cograph.retrieval.v1 import retrieval_pb2 as pb
from cograph.retrieval.v1 import retrieval_pb2_grpc
from tests.integration.support.git_repos import commit_all, git, make_repo, write
from tests.integration.support.retrieval import ADMIN, wait_job

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
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, "vault/core.py", VAULT_CODE)
    commit_all(root, "vault", JUN)
    return root


async def _index(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub,
    request: pb.IndexRepositoryRequest | pb.IndexCollectionRequest,
) -> None:
    if isinstance(request, pb.IndexRepositoryRequest):
        job = (await stub.IndexRepository(request, metadata=ADMIN, timeout=10)).job
    else:
        job = (await stub.IndexCollection(request, metadata=ADMIN, timeout=10)).job
    await wait_job(stub, job.id)


def make_corpus(base: Path) -> tuple[Path, Path, Path]:
    """The demo repository, the vault repository and the handbook directory, under `base`."""
    demo = make_search_repo(base / "demo")
    vault = make_vault_repo(base / "vault")
    handbook = base / "handbook"
    handbook.mkdir()
    (handbook / "onboarding.md").write_text(HANDBOOK_DOC)
    return demo, vault, handbook


async def index_corpus(
    stub: retrieval_pb2_grpc.RetrievalServiceAsyncStub, demo: Path, vault: Path, handbook: Path
) -> None:
    """Indexes the demo (public), the vault (private) and the handbook collection."""
    await _index(stub, pb.IndexRepositoryRequest(source=str(demo), slug=DEMO, public=True))
    await _index(stub, pb.IndexRepositoryRequest(source=str(vault), slug=VAULT))
    await _index(
        stub,
        pb.IndexCollectionRequest(
            name=HANDBOOK, description="engineering handbook", directory=str(handbook)
        ),
    )

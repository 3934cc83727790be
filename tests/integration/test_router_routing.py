"""The router against a real PostgreSQL with a small hand-built corpus.

Expected scores are computed by hand from the formula in router/scoring.py; the arithmetic is in the
comments. The corpus rows are written the way retrieval's indexer writes them (lowercased
entries in repository_terms / collection_terms, english tsvectors on chunks).

Repositories (slug: terms by field)
  R1 github.com/acme/billing       public
     label github.com/acme/billing, github.com, acme, billing; branch main;
     readme payments, invoices; qualified_name billing.retry.backoff, billing.invoice;
     path billing/retry/backoff.py
  R2 github.com/acme/payments-api  public
     label ..., payments-api; readme payments, api, stripe; qualified_name payments.client
  R3 github.com/acme/secret-ledger private, granted to alice
     label ..., secret-ledger; readme ledger, retry, billing;
     qualified_name ledger.retry_queue; path ledger/retry_queue.py
  R4 gitlab.com/ops/infra           public
     label gitlab.com/ops/infra, gitlab.com, ops, infra; readme terraform, kubernetes
Collections
  C1 glossary           public   description: terms, company; heading ledger;
                                 body "A ledger records every charge. Retries are scheduled
                                 by the billing engine."
  C2 runbooks           public   description: operational, runbooks; heading stripe outage;
                                 body "When Stripe webhooks fail, requeue them."
  C3 security-policies  private, granted to alice; heading secret rotation;
                                 body "Rotate billing credentials quarterly."
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cograph.router.v1 import router_pb2, router_pb2_grpc
from cograph_api.access_rules import Viewer
from cograph_cli import route_cmd
from router.app import MIGRATIONS, RouterApp, start_router
from router.routing import Routing
from router.settings import RouterSettings
from svckit.config import Env
from svckit.migrations import migrate
from tests.internal_auth import signed_channel, use_test_secret, with_secret

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO_ROOT = Path(__file__).resolve().parents[2]
ADMIN = Viewer("root", True)
ALICE = Viewer("alice", False)  # granted R3 and C3
BOB = Viewer("bob", False)  # no grants
ANONYMOUS = Viewer(None, False)

REPOSITORIES: dict[str, tuple[bool, dict[str, list[str]]]] = {
    "github.com/acme/billing": (
        True,
        {
            "label": ["github.com/acme/billing", "github.com", "acme", "billing"],
            "branch": ["main"],
            "readme": ["payments", "invoices"],
            "qualified_name": ["billing.retry.backoff", "billing.invoice"],
            "path": ["billing/retry/backoff.py"],
        },
    ),
    "github.com/acme/payments-api": (
        True,
        {
            "label": ["github.com/acme/payments-api", "github.com", "acme", "payments-api"],
            "branch": ["main"],
            "readme": ["payments", "api", "stripe"],
            "qualified_name": ["payments.client"],
        },
    ),
    "github.com/acme/secret-ledger": (
        False,
        {
            "label": ["github.com/acme/secret-ledger", "github.com", "acme", "secret-ledger"],
            "branch": ["main"],
            "readme": ["ledger", "retry", "billing"],
            "qualified_name": ["ledger.retry_queue"],
            "path": ["ledger/retry_queue.py"],
        },
    ),
    "gitlab.com/ops/infra": (
        True,
        {
            "label": ["gitlab.com/ops/infra", "gitlab.com", "ops", "infra"],
            "branch": ["main"],
            "readme": ["terraform", "kubernetes"],
        },
    ),
}

COLLECTIONS: dict[str, tuple[bool, dict[str, list[str]], str]] = {
    "glossary": (
        True,
        {"label": ["glossary"], "description": ["terms", "company"], "heading": ["ledger"]},
        "A ledger records every charge. Retries are scheduled by the billing engine.",
    ),
    "runbooks": (
        True,
        {
            "label": ["runbooks"],
            "description": ["operational", "runbooks"],
            "heading": ["stripe outage"],
        },
        "When Stripe webhooks fail, requeue them.",
    ),
    "security-policies": (
        False,
        {"label": ["security-policies"], "heading": ["secret rotation"]},
        "Rotate billing credentials quarterly.",
    ),
}
GRANTS = (("alice", "github.com/acme/secret-ledger"), ("alice", "security-policies"))


async def load_fixture(url: str) -> None:
    await migrate(url, "retrieval", REPO_ROOT / "services/retrieval/migrations")
    await migrate(url, "router", MIGRATIONS)
    conn = await asyncpg.connect(url)
    try:
        for slug, (public, fields) in REPOSITORIES.items():
            rid = await conn.fetchval(
                "INSERT INTO repositories (slug, branch, source, source_kind, public) "
                "VALUES ($1, 'main', $1, 'dir', $2) RETURNING id",
                slug,
                public,
            )
            for source, terms in fields.items():
                await conn.executemany(
                    "INSERT INTO repository_terms (repository_id, source, term) "
                    "VALUES ($1, $2, $3)",
                    [(rid, source, term) for term in terms],
                )
        for name, (public, fields, body) in COLLECTIONS.items():
            cid = await conn.fetchval(
                "INSERT INTO collections (name, public) VALUES ($1, $2) RETURNING id",
                name,
                public,
            )
            for source, terms in fields.items():
                await conn.executemany(
                    "INSERT INTO collection_terms (collection_id, source, term) "
                    "VALUES ($1, $2, $3)",
                    [(cid, source, term) for term in terms],
                )
            await conn.execute(
                "INSERT INTO md_collection_chunks (collection_id, path, start_line, end_line, "
                "body, content_hash, tsv) VALUES ($1, 'doc.md', 1, 3, $2, 'h', "
                "to_tsvector('english', $2))",
                cid,
                body,
            )
        for principal, target in GRANTS:
            await conn.execute(
                "INSERT INTO grants (principal_id, repository_id, collection_id) "
                "SELECT $1, (SELECT id FROM repositories WHERE slug = $2), "
                "(SELECT id FROM collections WHERE name = $2)",
                principal,
                target,
            )
    finally:
        await conn.close()


def router_settings(url: str, **overrides: str) -> RouterSettings:
    return RouterSettings.from_env(
        Env(with_secret({"ROUTER_LISTEN": "127.0.0.1:0", "ROUTER_DATABASE_URL": url, **overrides}))
    )


@pytest_asyncio.fixture(loop_scope="session")
async def router_app(fresh_db_url: str) -> AsyncIterator[RouterApp]:
    await load_fixture(fresh_db_url)
    app = await start_router(router_settings(fresh_db_url))
    try:
        yield app
    finally:
        await app.stop()


def repos(routing: Routing) -> dict[str, float]:
    return {r.name: r.confidence for r in routing.repositories}


def colls(routing: Routing) -> dict[str, float]:
    return {c.name: c.confidence for c in routing.collections}


LN = math.log


# --- scores -------------------------------------------------------------------------------


async def test_repository_scores_match_the_hand_computation(router_app: RouterApp) -> None:
    # Terms: billing, retry, stripe. Admin reads all four: N = 4.
    #   billing: R1 (label, qualified_name, path), R3 (readme)          df 2, idf ln(5/3)
    #   retry:   R1 (inside billing.retry.backoff and its path), R3      df 2, idf ln(5/3)
    #   stripe:  R2 (readme)                                            df 1, idf ln(5/2)
    #   sum idf = 2 ln(5/3) + ln(5/2) = 1.021651 + 0.916291 = 1.937942
    # R1: coverage 2 ln(5/3) / sum = 0.527183; label boost 1 + 0.5 * 1/3 -> 0.615047
    # R3: coverage 0.527183, no label term                                 -> 0.527183
    # R2: coverage ln(5/2) / sum = 0.472817                                -> 0.472817
    # R4 matched nothing and is dropped.
    routing = await router_app.router.route("billing retry stripe", viewer=ADMIN)
    total = 2 * LN(5 / 3) + LN(5 / 2)
    expected = {
        "github.com/acme/billing": 2 * LN(5 / 3) / total * (1 + 0.5 / 3),
        "github.com/acme/secret-ledger": 2 * LN(5 / 3) / total,
        "github.com/acme/payments-api": LN(5 / 2) / total,
    }
    assert [r.name for r in routing.repositories] == list(expected)
    assert repos(routing) == pytest.approx(expected, abs=1e-9)
    assert repos(routing)["github.com/acme/billing"] == pytest.approx(0.615047, abs=1e-6)
    rationale = routing.repositories[0].rationale
    assert rationale == "matched billing (label/qualified_name/path), retry (qualified_name/path)"
    assert routing.repositories[1].rationale == (
        "matched billing (readme), retry (qualified_name/path/readme)"
    )


async def test_collection_scores_match_the_hand_computation(router_app: RouterApp) -> None:
    # Terms: billing, retry, stripe. Admin reads all three collections: N = 3.
    #   billing: C1 body ("billing engine"), C3 body ("billing credentials")  df 2, ln(4/3)
    #   retry:   C1 body ("Retries" stems to retri, like retry)              df 1, ln(4/2)
    #   stripe:  C2 heading "stripe outage" and body                          df 1, ln(4/2)
    #   sum idf = ln(4/3) + 2 ln 2 = 0.287682 + 1.386294 = 1.673976
    # C1: (ln(4/3) + ln 2) / sum = 0.585929
    # C2: ln 2 / sum = 0.414071
    # C3: ln(4/3) / sum = 0.171855 < 0.2 -> weak
    routing = await router_app.router.route("billing retry stripe", viewer=ADMIN)
    total = LN(4 / 3) + 2 * LN(2)
    expected = {
        "glossary": (LN(4 / 3) + LN(2)) / total,
        "runbooks": LN(2) / total,
        "security-policies": LN(4 / 3) / total,
    }
    assert [c.name for c in routing.collections] == list(expected)
    assert colls(routing) == pytest.approx(expected, abs=1e-9)
    rationales = [c.rationale for c in routing.collections]
    assert rationales == [
        "matched billing (body), retry (body)",
        "matched stripe (heading/body)",
        "matched billing (body) (weak/fallback)",
    ]


async def test_collection_label_boost(router_app: RouterApp) -> None:
    # Terms: glossary, ledger, stripe; N = 3 (admin), each term df 1 -> idf ln 2 each.
    # C1: glossary (label) + ledger (heading, body): coverage 2/3, boost 1 + 0.5 * 1/3
    #     -> 2/3 * 7/6 = 0.777778.   C2: stripe: 1/3.
    routing = await router_app.router.route("glossary ledger stripe", viewer=ADMIN)
    assert colls(routing) == pytest.approx(
        {"glossary": 7 / 9, "runbooks": 1 / 3, "security-policies": 0.0}
    )
    assert routing.collections[0].rationale == "matched glossary (label), ledger (heading/body)"
    assert routing.collections[2].rationale == "no query term matched (weak/fallback)"


async def test_score_is_capped_at_one(router_app: RouterApp) -> None:
    # One term, billing, hit in R1's label: coverage 1, boost 1.5 -> min(1, 1.5) = 1.
    routing = await router_app.router.route("billing", viewer=ADMIN)
    assert repos(routing)["github.com/acme/billing"] == 1.0


async def test_a_typo_contributes_nothing(router_app: RouterApp) -> None:
    # Anonymous: R1, R2, R4 readable, N = 3. Terms: billing (df 1, idf ln 2), retyr (df 0 ->
    # idf 0). R1: coverage ln 2 / ln 2 = 1, boost 1 + 0.5 * 1/2 = 1.25 -> 1.0.
    # Had the typo weighed log((N+1)/1) = ln 4, R1 would score ln2/(ln2+ln4) * 1.25 = 0.4167.
    with_typo = await router_app.router.route("billing retyr", viewer=ANONYMOUS)
    assert repos(with_typo) == {"github.com/acme/billing": 1.0}
    # And with another real term, the typo changes nothing but the label-boost denominator:
    # terms billing, stripe, retyr: R1 coverage ln2 / 2ln2 = 0.5, boost 1 + 0.5/3 -> 0.583333.
    mixed = await router_app.router.route("billing stripe retyr", viewer=ANONYMOUS)
    assert repos(mixed) == pytest.approx(
        {"github.com/acme/billing": 0.5 * (1 + 0.5 / 3), "github.com/acme/payments-api": 0.5}
    )


async def test_substring_hits_inside_qualified_names(router_app: RouterApp) -> None:
    routing = await router_app.router.route("backoff", viewer=ADMIN)
    assert [r.name for r in routing.repositories] == ["github.com/acme/billing"]
    assert routing.repositories[0].rationale == "matched backoff (qualified_name/path)"
    # retry_queue, retry, queue: R3 has ledger.retry_queue; R1 only has retry (inside a name).
    routing = await router_app.router.route("retry_queue", viewer=ADMIN)
    # retry_queue df 1 (ln 5/2), retry df 2 (ln 5/3), queue df 1 (ln 5/2), N = 4.
    # R3 matches all three -> 1.0; R1 only retry: ln(5/3) / (2 ln(5/2) + ln(5/3)) = 0.218
    assert repos(routing) == pytest.approx(
        {
            "github.com/acme/secret-ledger": 1.0,
            "github.com/acme/billing": LN(5 / 3) / (2 * LN(5 / 2) + LN(5 / 3)),
        }
    )
    assert "retry_queue (qualified_name/path)" in routing.repositories[0].rationale


async def test_like_metacharacters_are_literal(router_app: RouterApp) -> None:
    # '_' is a LIKE wildcard: unescaped, the term payme_ts would match "payments". Its part
    # "payme" genuinely matches; the whole identifier must not.
    routing = await router_app.router.route("payme_ts", viewer=ADMIN)
    rationales = {r.name: r.rationale for r in routing.repositories}
    assert (
        rationales["github.com/acme/payments-api"] == "matched payme (label/qualified_name/readme)"
    )


async def test_short_terms_match_whole_entries_only(router_app: RouterApp) -> None:
    # "ap" is a substring of "payments-api" but too short for substring matching.
    assert (await router_app.router.route("ap", viewer=ADMIN)).repositories == []
    routing = await router_app.router.route("api", viewer=ADMIN)
    assert [r.name for r in routing.repositories] == ["github.com/acme/payments-api"]


@pytest.mark.parametrize(
    "query", ["billing retry stripe", "acme", "github.com payments ledger", "retry_queue"]
)
async def test_the_database_top_k_is_the_head_of_the_full_ranking(
    router_app: RouterApp, query: str
) -> None:
    # The SQL picks the top k with its own copy of the formula; Python scores those. Any k
    # must give the head of the complete ranking, ties (e.g. acme: every slug) included.
    full = await router_app.router.route(
        query, max_repositories=20, max_collections=20, viewer=ADMIN
    )
    for k in range(1, 5):
        head = await router_app.router.route(
            query, max_repositories=k, max_collections=k, viewer=ADMIN
        )
        assert head.repositories == full.repositories[:k]
        assert head.collections == full.collections[:k]


# --- the two asymmetries ------------------------------------------------------------------


async def test_unmatched_repositories_are_dropped_collections_are_not(
    router_app: RouterApp,
) -> None:
    routing = await router_app.router.route(
        "kubernetes", max_repositories=5, max_collections=2, viewer=ANONYMOUS
    )
    assert [r.name for r in routing.repositories] == ["gitlab.com/ops/infra"]
    # Nothing in the collections mentions kubernetes: still two, by name, at 0, marked weak.
    assert [(c.name, c.confidence) for c in routing.collections] == [
        ("glossary", 0.0),
        ("runbooks", 0.0),
    ]
    assert all(c.rationale.endswith("(weak/fallback)") for c in routing.collections)


async def test_a_question_of_only_stop_words(router_app: RouterApp) -> None:
    routing = await router_app.router.route("how does it work?", viewer=ADMIN)
    assert routing.repositories == []
    assert [c.name for c in routing.collections] == ["glossary", "runbooks", "security-policies"]


async def test_pools_are_not_normalised_against_each_other(router_app: RouterApp) -> None:
    # "stripe": the best repository and the best collection both score 1 in their own pool,
    # whatever the other pool holds; a repository change leaves collection scores untouched.
    routing = await router_app.router.route("stripe", viewer=ADMIN)
    assert repos(routing) == {"github.com/acme/payments-api": 1.0}
    assert colls(routing)["runbooks"] == 1.0


# --- access control -----------------------------------------------------------------------


async def test_private_sources_are_invisible_without_a_grant(router_app: RouterApp) -> None:
    for viewer in (ANONYMOUS, BOB):
        routing = await router_app.router.route(
            "ledger secret billing retry", max_repositories=20, max_collections=20, viewer=viewer
        )
        assert "github.com/acme/secret-ledger" not in repos(routing)
        assert "security-policies" not in colls(routing)
    for viewer in (ALICE, ADMIN):
        routing = await router_app.router.route(
            "ledger secret", max_repositories=20, max_collections=20, viewer=viewer
        )
        assert "github.com/acme/secret-ledger" in repos(routing)
        assert "security-policies" in colls(routing)


async def test_restricted_scores_equal_scores_over_the_readable_subset(
    router_app: RouterApp,
) -> None:
    # Bob reads R1, R2, R4 (N = 3); billing, retry, stripe each have df 1 there -> ln 2 each.
    # R1: 2/3 * (1 + 0.5/3) = 0.777778; R2: 1/3. Collections: C1, C2 (N = 2), each term df 1:
    # C1: 2/3, C2: 1/3. The grant-less view must not be shaped by R3 or C3 in N or df.
    query = "billing retry stripe"
    bob = await router_app.router.route(query, viewer=BOB)
    assert repos(bob) == pytest.approx(
        {"github.com/acme/billing": 7 / 9, "github.com/acme/payments-api": 1 / 3}
    )
    assert colls(bob) == pytest.approx({"glossary": 2 / 3, "runbooks": 1 / 3})
    # The same scores an admin gets once the private sources no longer exist at all.
    async with router_app.pool.acquire() as conn:
        await conn.execute("SET default_transaction_read_only = off")
        await conn.execute("DELETE FROM repositories WHERE NOT public")
        await conn.execute("DELETE FROM collections WHERE NOT public")
        await conn.execute("RESET default_transaction_read_only")
    admin = await router_app.router.route(query, viewer=ADMIN)
    assert repos(admin) == pytest.approx(repos(bob), abs=1e-12)
    assert colls(admin) == pytest.approx(colls(bob), abs=1e-12)
    assert [r.rationale for r in admin.repositories] == [r.rationale for r in bob.repositories]


async def test_public_sources_are_visible_to_everyone(router_app: RouterApp) -> None:
    for viewer in (ANONYMOUS, BOB, ALICE, ADMIN):
        routing = await router_app.router.route("terraform", viewer=viewer)
        assert [r.name for r in routing.repositories] == ["gitlab.com/ops/infra"]


# --- freshness ----------------------------------------------------------------------------


async def test_deleting_a_repository_removes_it_at_once(
    router_app: RouterApp, fresh_db_url: str
) -> None:
    before = await router_app.router.route("billing retry stripe", viewer=ADMIN)
    assert "github.com/acme/secret-ledger" in repos(before)
    conn = await asyncpg.connect(fresh_db_url)
    try:
        await conn.execute("DELETE FROM repositories WHERE slug = 'github.com/acme/secret-ledger'")
    finally:
        await conn.close()
    after = await router_app.router.route("billing retry stripe", viewer=ADMIN)
    # N = 3 and billing/retry now have df 1: R1 = 2 ln2 / 3 ln2 * 7/6 = 7/9, R2 = 1/3.
    assert repos(after) == pytest.approx(
        {"github.com/acme/billing": 7 / 9, "github.com/acme/payments-api": 1 / 3}
    )
    # The collection pool is scored on its own: deleting a repository changes nothing there.
    assert colls(after) == colls(before)


async def test_reindexed_terms_are_used_at_once(router_app: RouterApp, fresh_db_url: str) -> None:
    conn = await asyncpg.connect(fresh_db_url)
    try:
        # What retrieval's finish_repository does: swap the repository's terms in one go.
        async with conn.transaction():
            rid = await conn.fetchval(
                "SELECT id FROM repositories WHERE slug = 'gitlab.com/ops/infra'"
            )
            await conn.execute("DELETE FROM repository_terms WHERE repository_id = $1", rid)
            await conn.execute(
                "INSERT INTO repository_terms VALUES ($1, 'qualified_name', 'infra.helm.chart')",
                rid,
            )
    finally:
        await conn.close()
    assert (await router_app.router.route("terraform", viewer=ADMIN)).repositories == []
    routing = await router_app.router.route("helm", viewer=ADMIN)
    assert [r.name for r in routing.repositories] == ["gitlab.com/ops/infra"]


async def test_the_router_cannot_write(router_app: RouterApp) -> None:
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        await router_app.pool.execute("DELETE FROM repositories")


# --- over real gRPC -----------------------------------------------------------------------


def _metadata(principal: str | None, admin: bool = False) -> tuple[tuple[str, str], ...]:
    if principal is None:
        return ()
    return (("x-cograph-principal", principal), ("x-cograph-admin", "1" if admin else "0"))


async def _call(
    app: RouterApp, request: router_pb2.RouteRequest, principal: str | None = None
) -> router_pb2.RouteResponse:
    async with signed_channel(f"127.0.0.1:{app.port}") as channel:
        stub = router_pb2_grpc.RouterServiceStub(channel)
        reply: router_pb2.RouteResponse = await stub.Route(
            request, metadata=_metadata(principal), timeout=10
        )
        return reply


async def test_health_and_route_over_grpc(router_app: RouterApp) -> None:
    async with signed_channel(f"127.0.0.1:{router_app.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(
            health_pb2.HealthCheckRequest(service="cograph.router.v1.RouterService"), timeout=5
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    # Principal from metadata: alice sees her private repository, bob does not.
    request = router_pb2.RouteRequest(query="ledger")
    alice = await _call(router_app, request, "alice")
    bob = await _call(router_app, request, "bob")
    assert [r.slug for r in alice.repositories] == ["github.com/acme/secret-ledger"]
    assert alice.repositories[0].confidence == 1.0
    assert list(bob.repositories) == []
    # Defaults: 3 collections when unset (alice reads all three).
    assert len(alice.collections) == 3


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"query": ""}, "blank"),
        ({"query": "   "}, "blank"),
        ({"query": "x" * 1001}, "1000 characters"),
        ({"query": "billing", "max_repositories": 0}, "max_repositories: must be between 1 and 20"),
        ({"query": "billing", "max_repositories": 21}, "max_repositories"),
        ({"query": "billing", "max_repositories": -1}, "max_repositories"),
        ({"query": "billing", "max_collections": 0}, "max_collections: must be between 1 and 20"),
        ({"query": "billing", "max_collections": 21}, "max_collections"),
    ],
)
async def test_limits_are_invalid_argument(
    router_app: RouterApp, fields: dict[str, object], needle: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _call(router_app, router_pb2.RouteRequest(**fields))  # type: ignore[arg-type]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in (caught.value.details() or "")


async def test_limits_at_their_edges_are_accepted(router_app: RouterApp) -> None:
    one = await _call(
        router_app,
        router_pb2.RouteRequest(query="acme", max_repositories=1, max_collections=1),
        "root",
    )
    assert len(one.repositories) == 1 and len(one.collections) == 1
    twenty = await _call(
        router_app,
        router_pb2.RouteRequest(query="x " * 500, max_repositories=20, max_collections=20),
    )
    assert len("x " * 500) == 1000
    assert list(twenty.repositories) == []
    assert len(twenty.collections) == 2  # anonymous reads two collections; all come back


# --- the CLI ------------------------------------------------------------------------------


async def test_cli_route_json_is_the_rest_body(
    router_app: RouterApp, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUTER_ADDR", f"127.0.0.1:{router_app.port}")
    monkeypatch.setenv("COGRAPH_PRINCIPAL", "alice")
    use_test_secret(monkeypatch)
    parser = argparse.ArgumentParser()
    route_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["route", "ledger", "--json", "--max-collections", "1"])
    # The command runs its own event loop (asyncio.run); give it a thread of its own.
    assert await asyncio.to_thread(args.handler, args) == 0
    body = json.loads(capsys.readouterr().out)
    assert body == {
        "repositories": [
            {
                "slug": "github.com/acme/secret-ledger",
                "confidence": 1.0,
                "rationale": "matched ledger (label/qualified_name/path/readme)",
            }
        ],
        "collections": [
            {"name": "glossary", "confidence": 1.0, "rationale": "matched ledger (heading/body)"}
        ],
    }
    bad = parser.parse_args(["route", "ledger", "--json", "--max-repositories", "0"])
    assert await asyncio.to_thread(bad.handler, bad) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "invalid_argument"

"""Access control inside the scoring SQL, the access RPCs, and graph expansion with real
edge kinds: a principal without a grant gets nothing of a private repository -- no
results, no graph nodes, the same NOT_FOUND as a repository that does not exist."""

from __future__ import annotations

import asyncpg
import grpc
import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from tests.integration.support.retrieval import ADMIN, ALICE, BOB, SearchEnv
from tests.integration.support.search_corpus import DEMO, HANDBOOK, VAULT

pytestmark = pytest.mark.asyncio(loop_scope="session")

VAULT_QUERY = "open the treasure vault with the secret key"


def _edges(graph: pb.Graph) -> set[tuple[str, str, int]]:
    return {(getattr(e, "from"), e.to, e.kind) for e in graph.edges}


async def _vault_hits(env: SearchEnv, who: tuple[tuple[str, str], ...]) -> list[pb.SearchResult]:
    reply = await env.search(VAULT_QUERY, metadata=who, top_k=100)
    return [r for r in reply.results if r.repo == VAULT]


async def test_private_repository_is_invisible_without_a_grant(search_env: SearchEnv) -> None:
    assert await _vault_hits(search_env, ADMIN)
    assert not await _vault_hits(search_env, ALICE)
    assert not await _vault_hits(search_env, BOB)
    for who in (ALICE, BOB):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await search_env.search("open_vault", metadata=who, repo=VAULT)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert "no repository" in (caught.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await search_env.stub.Graph(
                pb.GraphRequest(repo=VAULT, symbol="open_vault"), metadata=who, timeout=10
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    # A private collection too.
    reply = await search_env.search("laptop", metadata=ADMIN, collection=HANDBOOK)
    assert reply.results
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await search_env.search("laptop", metadata=ALICE, collection=HANDBOOK)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_grant_revoke_and_visibility(search_env: SearchEnv) -> None:
    stub = search_env.stub
    grant = pb.GrantAccessRequest(principal_id="alice", repository=VAULT)
    for who in (ALICE, BOB):  # only admins manage access
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GrantAccess(grant, metadata=who, timeout=5)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SetVisibility(
                pb.SetVisibilityRequest(repository=VAULT, public=True), metadata=who, timeout=5
            )
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    try:
        assert (await stub.GrantAccess(grant, metadata=ADMIN, timeout=5)).changed
        assert not (await stub.GrantAccess(grant, metadata=ADMIN, timeout=5)).changed
        assert await _vault_hits(search_env, ALICE)
        assert not await _vault_hits(search_env, BOB)
        revoke = pb.RevokeAccessRequest(principal_id="alice", repository=VAULT)
        assert (await stub.RevokeAccess(revoke, metadata=ADMIN, timeout=5)).changed
        assert not (await stub.RevokeAccess(revoke, metadata=ADMIN, timeout=5)).changed
        assert not await _vault_hits(search_env, ALICE)

        public = pb.SetVisibilityRequest(repository=VAULT, public=True)
        assert (await stub.SetVisibility(public, metadata=ADMIN, timeout=5)).changed
        assert not (await stub.SetVisibility(public, metadata=ADMIN, timeout=5)).changed
        assert await _vault_hits(search_env, BOB)
        collection = pb.GrantAccessRequest(principal_id="bob", collection=HANDBOOK)
        assert (await stub.GrantAccess(collection, metadata=ADMIN, timeout=5)).changed
        assert (await search_env.search("laptop", metadata=BOB, collection=HANDBOOK)).results
    finally:
        await stub.SetVisibility(
            pb.SetVisibilityRequest(repository=VAULT, public=False), metadata=ADMIN, timeout=5
        )
        await stub.RevokeAccess(
            pb.RevokeAccessRequest(principal_id="bob", collection=HANDBOOK),
            metadata=ADMIN,
            timeout=5,
        )
    assert not await _vault_hits(search_env, BOB)

    for bad, code in (
        (pb.GrantAccessRequest(principal_id="alice"), grpc.StatusCode.INVALID_ARGUMENT),
        (pb.GrantAccessRequest(repository=VAULT), grpc.StatusCode.INVALID_ARGUMENT),
        (
            pb.GrantAccessRequest(principal_id="alice", repository="example.com/x/y"),
            grpc.StatusCode.NOT_FOUND,
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GrantAccess(bad, metadata=ADMIN, timeout=5)
        assert caught.value.code() == code


async def test_graph_edges_carry_their_real_kinds(search_env: SearchEnv) -> None:
    reply = await search_env.search(
        "ParseConfig.load", repo=DEMO, include_graph=True, top_k=3, layers=[pb.LAYER_CODE]
    )
    load = next(r for r in reply.results if r.qualified_name.endswith("ParseConfig.load"))
    nodes = {n.id: n for n in reply.graph.nodes}
    by_name = {n.qualified_name.rsplit(".", 1)[-1]: n.id for n in reply.graph.nodes}
    ids = {r.id for r in reply.results} | set(nodes)
    edges = _edges(reply.graph)
    assert all(src in ids and dst in ids for src, dst, _ in edges)
    # load calls parse and read_text; ParseConfig contains load.
    parse = by_name.get("parse") or next(
        r.id for r in reply.results if r.qualified_name.endswith("ParseConfig.parse")
    )
    assert (load.id, parse, pb.EDGE_KIND_CALLS) in edges
    assert (load.id, by_name["read_text"], pb.EDGE_KIND_CALLS) in edges
    # The class is never a result beside its member (containment): the graph brings it.
    assert not any(r.qualified_name.endswith("ParseConfig") for r in reply.results)
    assert (by_name["ParseConfig"], load.id, pb.EDGE_KIND_CONTAINS) in edges
    assert len(reply.graph.nodes) <= 20
    assert not set(nodes) & {r.id for r in reply.results}

    # No graph unless asked.
    plain = await search_env.search("ParseConfig.load", repo=DEMO, top_k=3)
    assert not plain.HasField("graph")


async def test_graph_rpc_implements_and_acl(search_env: SearchEnv) -> None:
    reply = await search_env.stub.Graph(
        pb.GraphRequest(repo=DEMO, symbol="Hello"), metadata=BOB, timeout=10
    )
    hello = reply.definitions[0]
    assert hello.qualified_name.endswith("Hello") and hello.kind == "class"
    greeter = next(n for n in reply.graph.nodes if n.qualified_name.endswith("Greeter"))
    assert (hello.id, greeter.id, pb.EDGE_KIND_IMPLEMENTS) in _edges(reply.graph)

    vault = await search_env.stub.Graph(
        pb.GraphRequest(repo=VAULT, symbol="open_vault"), metadata=ADMIN, timeout=10
    )
    opened = vault.definitions[0]
    unlock = next(n for n in vault.graph.nodes if n.qualified_name.endswith("unlock_vault"))
    assert (opened.id, unlock.id, pb.EDGE_KIND_CALLS) in _edges(vault.graph)


async def test_graph_never_shows_a_node_of_an_unreadable_repository(
    search_env: SearchEnv,
) -> None:
    # An edge that points from the public repository into the private one: the graph
    # must drop the private node and the edge. The schema refuses such an edge (its
    # foreign keys pair repository_id, retrieval migration 0018); it is written past them
    # here (session_replication_role = replica, as a restore of a damaged dump could), so
    # that the graph's own check is what is tested.
    async with search_env.pool.acquire() as conn:
        src = await conn.fetchrow(
            "SELECT n.id, n.repository_id FROM code_nodes n JOIN repositories r "
            "ON r.id = n.repository_id WHERE r.slug = $1 AND n.qualified_name LIKE "
            "'%read_text'",
            DEMO,
        )
        dst = await conn.fetchval(
            "SELECT n.id FROM code_nodes n JOIN repositories r ON r.id = n.repository_id "
            "WHERE r.slug = $1 AND n.name = 'unlock_vault'",
            VAULT,
        )
        load = await conn.fetchval(
            "SELECT n.id FROM code_nodes n JOIN repositories r ON r.id = n.repository_id "
            "WHERE r.slug = $1 AND n.qualified_name LIKE '%ParseConfig.load'",
            DEMO,
        )
        insert = (
            "INSERT INTO code_edges (repository_id, src_node_id, dst_node_id, dst_name, kind) "
            "VALUES ($1, $2, $3, 'unlock_vault', 'calls') RETURNING id"
        )
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await conn.fetchval(insert, src["repository_id"], src["id"], dst)
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            edge = await conn.fetchval(insert, src["repository_id"], src["id"], dst)
    try:
        for who in (ALICE, ADMIN):
            reply = await search_env.search(
                "read_text", metadata=who, repo=DEMO, include_graph=True, top_k=5
            )
            # What the reader may see is still there: read_text and its readable caller.
            assert f"code:{src['id']}" in {r.id for r in reply.results}
            # The caller is a graph node, or a result once containers no longer take places.
            shown = {n.id for n in reply.graph.nodes} | {r.id for r in reply.results}
            assert f"code:{load}" in shown
            calls = (f"code:{load}", f"code:{src['id']}", pb.EDGE_KIND_CALLS)
            assert calls in _edges(reply.graph)
            assert f"code:{dst}" not in {n.id for n in reply.graph.nodes}
            assert all(f"code:{dst}" not in (getattr(e, "from"), e.to) for e in reply.graph.edges)
            graph = await search_env.stub.Graph(
                pb.GraphRequest(repo=DEMO, symbol="read_text"), metadata=who, timeout=10
            )
            assert f"code:{src['id']}" in {d.id for d in graph.definitions}
            assert calls in _edges(graph.graph)
            assert f"code:{dst}" not in {n.id for n in graph.graph.nodes}
    finally:
        async with search_env.pool.acquire() as conn:
            await conn.execute("DELETE FROM code_edges WHERE id = $1", edge)

"""Search over real gRPC on real indexed fixtures, with the real embedder and PostgreSQL:
the three query kinds, provenance and per-stream scores, snippets, determinism."""

from __future__ import annotations

import pytest

from cograph.retrieval.v1 import retrieval_pb2 as pb
from retrieval.search.fusion import PIN_SCORE
from retrieval.search.search_settings import DEFAULT_RRF_K
from tests.integration.support.retrieval import SearchEnv, ranked, stream_names
from tests.integration.support.search_corpus import DEMO, HANDBOOK

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_exact_symbol_returns_its_definition_first(search_env: SearchEnv) -> None:
    reply = await search_env.search("ParseConfig", repo=DEMO)
    top = reply.results[0]
    assert top.qualified_name.endswith("ParseConfig") and top.kind == "class"
    assert top.layer == pb.LAYER_CODE and top.store == pb.STORE_CODE
    assert top.repo == DEMO and top.path == "pkg/config.py" and len(top.commit) == 40
    assert top.start_line >= 1 and top.end_line > top.start_line
    assert "class ParseConfig" in top.snippet
    assert top.id.startswith("code:")
    # All three streams found it, and each raw score is reported.
    streams = stream_names(top)
    assert set(streams) == {pb.STREAM_VECTOR, pb.STREAM_LEXICAL, pb.STREAM_SYMBOL}
    assert streams[pb.STREAM_SYMBOL].rank == 1 and streams[pb.STREAM_LEXICAL].rank == 1
    assert top.HasField("vector_score") and top.HasField("bm25_score")
    assert top.HasField("symbol_score") and not top.HasField("rerank_score")
    assert top.symbol_score == pytest.approx(streams[pb.STREAM_SYMBOL].score)
    assert 0.3 <= top.symbol_score <= 1.0 and 0 < top.vector_score <= 1.0
    assert reply.streams.vector == pb.STREAM_STATUS_OK
    assert reply.streams.lexical == pb.STREAM_STATUS_OK
    assert reply.streams.symbol == pb.STREAM_STATUS_OK
    # RRF arithmetic: the fused score is the sum of 1 / (k + rank) over its streams, plus
    # the pin of an exact match in case (3 levels), which keeps score and order in step.
    k = DEFAULT_RRF_K
    rrf = sum(1 / (k + p.rank) for p in top.provenance)
    assert top.score == pytest.approx(3 * PIN_SCORE + rrf)
    others = [r for r in reply.results if "ParseConfig" not in r.qualified_name]
    assert others and all(r.score < PIN_SCORE for r in others)


async def test_go_signature_query_finds_the_method(search_env: SearchEnv) -> None:
    reply = await search_env.search("func (s *Server) Handle", repo=DEMO)
    names = [r.qualified_name for r in reply.results[:3]]
    assert any(name.endswith("Server.Handle") for name in names), names
    hit = next(r for r in reply.results if r.qualified_name.endswith("Server.Handle"))
    assert hit.path == "server/server.go" and hit.kind == "method"
    assert "func (s *Server) Handle" in hit.snippet


async def test_prose_question_finds_function_and_doc_chunk(search_env: SearchEnv) -> None:
    reply = await search_env.search("how does billing retry a failed charge")
    code = [r for r in reply.results if r.store == pb.STORE_CODE]
    docs = [r for r in reply.results if r.store == pb.STORE_REPO_DOCS]
    assert code and code[0].qualified_name.endswith("retry_failed_charge"), [
        r.qualified_name for r in code
    ]
    assert docs and docs[0].path == "docs/billing.md"
    assert "Retries" in docs[0].qualified_name and docs[0].kind == "section"
    assert docs[0].layer == pb.LAYER_REPO_DOC
    # Both are in the top five of the fused list.
    top5 = [r.id for r in reply.results[:5]]
    assert code[0].id in top5 and docs[0].id in top5


async def test_same_query_same_order(search_env: SearchEnv) -> None:
    for query in ("ParseConfig", "server format request", "billing retries"):
        first = await search_env.search(query, top_k=100)
        second = await search_env.search(query, top_k=100)
        assert ranked(first) == ranked(second)
        assert [r.score for r in first.results] == [r.score for r in second.results]
        # Fused scores never increase down the list, and equal scores are in id order.
        pairs = list(zip(first.results, first.results[1:], strict=False))
        assert all(a.score >= b.score for a, b in pairs)
        for a, b in pairs:
            if a.score == b.score:
                assert int(a.id.split(":")[1]) <= int(b.id.split(":")[1])


async def test_layers_and_snippet_widths(search_env: SearchEnv) -> None:
    both = await search_env.search("ParseConfig", repo=DEMO, layers=[pb.LAYER_CODE, pb.LAYER_AST])
    first, second = both.results[0], both.results[1]
    # One chunk at two layers: same id, the ast row carrying only the signature.
    assert first.id == second.id
    assert (first.layer, second.layer) == (pb.LAYER_CODE, pb.LAYER_AST)
    assert second.snippet.startswith("class ParseConfig")
    assert "\n" not in second.snippet.strip()

    summary = await search_env.search("ParseConfig", repo=DEMO, layers=[pb.LAYER_AST_SUMMARY])
    assert {r.layer for r in summary.results} == {pb.LAYER_AST_SUMMARY}
    assert "ParseConfig" in summary.results[0].snippet

    broad = await search_env.search("ParseConfig validate", top_k=100)
    assert pb.LAYER_AST not in {r.layer for r in broad.results}  # never in broad searches

    narrow = await search_env.search("validate", repo=DEMO, snippet_chars=80, top_k=100)
    assert all(len(r.snippet) <= 80 for r in narrow.results)
    long_hits = [r for r in narrow.results if r.truncated]
    assert long_hits, "some bodies are longer than 80 characters"
    # No result contains another: the module holding `validate` folded into its members.
    spans = [(r.repo, r.path, r.start_line, r.end_line, r.id) for r in narrow.results]
    for repo, path, start, end, rid in spans:
        assert not any(
            (repo, path) == (o[0], o[1])
            and start <= o[2]
            and o[3] <= end
            and rid != o[4]
            and (start, end) != (o[2], o[3])
            for o in spans
        )
    assert len({r.id for r in narrow.results}) == len(narrow.results)  # one row per node


async def test_vector_only_hit_is_head_anchored(search_env: SearchEnv) -> None:
    reply = await search_env.search(
        "zzqx", repo=DEMO, streams=[pb.STREAM_VECTOR], snippet_chars=80, top_k=5
    )
    assert reply.streams.lexical == pb.STREAM_STATUS_SKIPPED
    assert reply.streams.symbol == pb.STREAM_STATUS_SKIPPED
    assert reply.results
    for result in reply.results:
        assert [p.stream for p in result.provenance] == [pb.STREAM_VECTOR]
        assert not result.HasField("bm25_score") and not result.HasField("symbol_score")


async def test_collection_search(search_env: SearchEnv) -> None:
    reply = await search_env.search("when do new engineers get a laptop", collection=HANDBOOK)
    top = reply.results[0]
    assert top.store == pb.STORE_MD_COLLECTIONS and top.layer == pb.LAYER_MD_COLLECTION
    assert top.collection == HANDBOOK and top.repo == "" and "Laptops" in top.qualified_name
    assert reply.streams.symbol == pb.STREAM_STATUS_SKIPPED
    # Broad searches never reach collections.
    broad = await search_env.search("new engineers laptop first day", top_k=100)
    assert all(r.store != pb.STORE_MD_COLLECTIONS for r in broad.results)


async def test_a_bare_method_name_finds_its_definition(search_env: SearchEnv) -> None:
    # `load` shares too few trigrams with `pkg.config.ParseConfig.load` to pass the 0.3
    # similarity threshold; the symbol stream still finds it, by name, and ranks it first.
    reply = await search_env.search("load", repo=DEMO)
    top = reply.results[0]
    assert top.qualified_name == "pkg.config.ParseConfig.load" and top.kind == "method"
    symbol = stream_names(top)[pb.STREAM_SYMBOL]
    assert symbol.rank == 1 and 0 < symbol.score < 0.3


async def test_nonsense_says_no_good_answer_and_a_named_symbol_is_high(
    search_env: SearchEnv,
) -> None:
    nonsense = await search_env.search("zzqqxx nothing here")
    # The vector stream always has nearest neighbours: results come back, and say so.
    assert nonsense.results
    assert nonsense.confidence == pb.CONFIDENCE_LOW and nonsense.no_good_answer
    assert {r.confidence for r in nonsense.results} == {pb.CONFIDENCE_LOW}
    named = await search_env.search("ParseConfig", repo=DEMO)
    assert named.confidence == pb.CONFIDENCE_HIGH and not named.no_good_answer
    assert named.results[0].confidence == pb.CONFIDENCE_HIGH
